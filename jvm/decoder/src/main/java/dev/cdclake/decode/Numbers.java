package dev.cdclake.decode;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import org.apache.spark.sql.types.Decimal;

/**
 * Number conversions of the decoders: base64 two's-complement unscaled values (Kafka Connect {@code Decimal}),
 * fixed-precision decimals, exact decimal text, and the numeric text of source positions.
 */
final class Numbers {
  private Numbers() {}

  private static final byte[] BASE64 = new byte[128];
  private static final long[] POW10 = new long[19];

  static {
    java.util.Arrays.fill(BASE64, (byte) -1);
    String alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < alphabet.length(); i++) {
      BASE64[alphabet.charAt(i)] = (byte) i;
    }
    POW10[0] = 1;
    for (int i = 1; i < POW10.length; i++) {
      POW10[i] = POW10[i - 1] * 10;
    }
  }

  /** Thrown for text that is not standard, padded base64 (never escapes the decoders). */
  static final class NotBase64 extends Exception {
    private static final long serialVersionUID = 1L;

    NotBase64() {
      super(null, null, false, false);
    }
  }

  private static final NotBase64 NOT_BASE64 = new NotBase64();

  /** Number of bytes the base64 text {@code chars[off, off+len)} decodes to; throws for invalid text. */
  static int base64Length(char[] chars, int off, int len) throws NotBase64 {
    if (len % 4 != 0) {
      throw NOT_BASE64;
    }
    if (len == 0) {
      return 0;
    }
    int pad = chars[off + len - 1] == '=' ? (chars[off + len - 2] == '=' ? 2 : 1) : 0;
    return len / 4 * 3 - pad;
  }

  private static int sextet(char c) throws NotBase64 {
    if (c >= 128 || BASE64[c] < 0) {
      throw NOT_BASE64;
    }
    return BASE64[c];
  }

  /** Standard base64 (RFC 4648, padded, no line breaks) to bytes. */
  static byte[] base64(char[] chars, int off, int len) throws NotBase64 {
    int n = base64Length(chars, off, len);
    byte[] out = new byte[n];
    int o = 0;
    for (int i = 0; i < len; i += 4) {
      int a = sextet(chars[off + i]);
      int b = sextet(chars[off + i + 1]);
      char c3 = chars[off + i + 2];
      char c4 = chars[off + i + 3];
      boolean last = i + 4 == len;
      if (c3 == '=') {
        if (!last || c4 != '=' || (b & 0xF) != 0) {
          throw NOT_BASE64;
        }
        out[o++] = (byte) (a << 2 | b >> 4);
        break;
      }
      int c = sextet(c3);
      if (c4 == '=') {
        if (!last || (c & 0x3) != 0) {
          throw NOT_BASE64;
        }
        out[o++] = (byte) (a << 2 | b >> 4);
        out[o++] = (byte) (b << 4 | c >> 2);
        break;
      }
      int d = sextet(c4);
      out[o++] = (byte) (a << 2 | b >> 4);
      out[o++] = (byte) (b << 4 | c >> 2);
      out[o++] = (byte) (c << 6 | d);
    }
    return out;
  }

  static byte[] base64(String text) throws NotBase64 {
    return base64(text.toCharArray(), 0, text.length());
  }

  /**
   * The big-endian two's-complement value of base64 text that decodes to at most 8 bytes, as a long; the caller
   * checks {@link #base64Length} first. Empty text is 0.
   */
  static long base64Long(char[] chars, int off, int len) throws NotBase64 {
    int n = base64Length(chars, off, len);
    byte[] small = base64(chars, off, len);
    long v = n > 0 && small[0] < 0 ? -1L : 0L;
    for (int i = 0; i < n; i++) {
      v = v << 8 | (small[i] & 0xFF);
    }
    return v;
  }

  /** Unscaled big-endian two's-complement bytes to a BigInteger (empty: 0). */
  static BigInteger unscaled(byte[] bytes) {
    return bytes.length == 0 ? BigInteger.ZERO : new BigInteger(bytes);
  }

  /** {@code unscaled * 10^-scale} as {@code decimal(precision, scale)}, or null when it has too many digits. */
  static Decimal decimal(long unscaled, int precision, int scale) {
    if (precision <= 18) {
      long bound = POW10[precision];
      if (unscaled <= -bound || unscaled >= bound) {
        return null;
      }
    }
    Decimal d = new Decimal();
    return d.setOrNull(unscaled, precision, scale);
  }

  /** As {@link #decimal(long, int, int)} for any width. */
  static Decimal decimal(BigInteger unscaled, int precision, int scale) {
    if (unscaled.bitLength() < 64) {
      return decimal(unscaled.longValue(), precision, scale);
    }
    BigDecimal value = new BigDecimal(unscaled, scale);
    if (value.precision() > precision) {
      return null;
    }
    return Decimal.apply(value, precision, scale);
  }

  /** Exact plain text of {@code unscaled * 10^-scale} (no exponent; {@code 0} keeps no zeros for scale < 0). */
  static String plain(BigInteger unscaled, int scale) {
    return new BigDecimal(unscaled, scale).toPlainString();
  }

  private static final Decimal ZERO = Decimal.apply(0L);

  /**
   * Numeric text of a source offset field as {@code decimal(38,0)} (rounded half up, as Spark's cast of text to
   * decimal), or null when it is not a number or has more than 38 digits.
   */
  static Decimal positionNumber(String text) {
    if (text == null) {
      return null;
    }
    int n = text.length();
    if (n > 0 && n <= 18) {
      long v = 0;
      int i = 0;
      boolean digits = true;
      for (; i < n; i++) {
        char c = text.charAt(i);
        if (c < '0' || c > '9') {
          digits = false;
          break;
        }
        v = v * 10 + (c - '0');
      }
      if (digits) {
        return Decimal.apply(v);
      }
    }
    String t = text.strip();
    if (t.isEmpty()) {
      return null;
    }
    try {
      BigDecimal value = new BigDecimal(t).setScale(0, RoundingMode.HALF_UP);
      if (value.precision() > 38) {
        return null;
      }
      return Decimal.apply(value);
    } catch (NumberFormatException | ArithmeticException e) {
      return null;
    }
  }

  static Decimal orZero(Decimal d) {
    return d == null ? ZERO : d;
  }

  /** Integer text as a long (surrounding spaces allowed), or null: Spark's {@code try_cast(text AS BIGINT)}. */
  static Long parseLong(String text) {
    if (text == null) {
      return null;
    }
    String t = text.strip();
    if (t.isEmpty()) {
      return null;
    }
    try {
      return Long.parseLong(t.charAt(0) == '+' ? t.substring(1) : t);
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
