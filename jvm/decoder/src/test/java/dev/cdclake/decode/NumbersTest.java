package dev.cdclake.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Base64;
import java.util.Random;
import org.apache.spark.sql.types.Decimal;
import org.junit.jupiter.api.Test;

class NumbersTest {
  private static char[] chars(String s) {
    return s.toCharArray();
  }

  @Test
  void base64AgreesWithTheJdkOnRandomBytes() throws Exception {
    Random random = new Random(7);
    for (int n = 0; n < 40; n++) {
      byte[] bytes = new byte[n];
      random.nextBytes(bytes);
      String text = Base64.getEncoder().encodeToString(bytes);
      assertArrayEquals(bytes, Numbers.base64(text), text);
      assertEquals(n, Numbers.base64Length(chars(text), 0, text.length()));
    }
  }

  @Test
  void base64RefusesWhatIsNotStandardPaddedBase64() {
    for (String bad : new String[] {"A", "AB", "ABC", "A===", "AB=C", "A@BC", "AB==CD==", "AQ=\n", "AR==", "AQJ="}) {
      assertThrows(Numbers.NotBase64.class, () -> Numbers.base64(bad), bad);
    }
  }

  @Test
  void base64LongIsTheSignExtendedBigEndianValue() throws Exception {
    long[] values = {0, 1, -1, 127, 128, -128, -129, 255, 256, Long.MAX_VALUE, Long.MIN_VALUE, 1234567890123L};
    for (long v : values) {
      byte[] minimal = BigInteger.valueOf(v).toByteArray();
      String text = Base64.getEncoder().encodeToString(minimal);
      assertEquals(v, Numbers.base64Long(chars(text), 0, text.length()), text);
    }
    assertEquals(0L, Numbers.base64Long(chars(""), 0, 0));
  }

  @Test
  void decimalsFitTheirPrecisionOrAreNull() {
    assertEquals(new BigDecimal("-123.45"), Numbers.decimal(-12345L, 10, 2).toJavaBigDecimal());
    assertEquals(new BigDecimal("999.99"), Numbers.decimal(99999L, 5, 2).toJavaBigDecimal());
    assertNull(Numbers.decimal(100000L, 5, 2));
    assertNull(Numbers.decimal(-100000L, 5, 2));
    BigInteger wide = BigInteger.TEN.pow(37).negate();
    assertEquals(new BigDecimal(wide, 3), Numbers.decimal(wide, 38, 3).toJavaBigDecimal());
    assertNull(Numbers.decimal(BigInteger.TEN.pow(38), 38, 0));
    assertNull(Numbers.decimal(BigInteger.TEN.pow(20), 20, 0));
  }

  @Test
  void plainTextIsExactWithoutExponent() {
    assertEquals("-1.07", Numbers.plain(BigInteger.valueOf(-107), 2));
    assertEquals("0.00", Numbers.plain(BigInteger.ZERO, 2));
    assertEquals("1200", Numbers.plain(BigInteger.valueOf(12), -2));
    assertEquals("0", Numbers.plain(BigInteger.ZERO, -2));
    assertEquals("0.0000000001", Numbers.plain(BigInteger.ONE, 10));
  }

  @Test
  void positionNumbersAreDecimalsOfAtMost38Digits() {
    assertEquals(Decimal.apply(123L), Numbers.positionNumber("123"));
    assertEquals(Decimal.apply(12L), Numbers.positionNumber(" 12 "));
    assertEquals(Decimal.apply(2L), Numbers.positionNumber("1.5"));
    assertEquals(Decimal.apply(-5L), Numbers.positionNumber("-5"));
    assertEquals(Decimal.apply(new BigDecimal("9223372036854775813")), Numbers.positionNumber("9223372036854775813"));
    assertNull(Numbers.positionNumber("abc"));
    assertNull(Numbers.positionNumber(""));
    assertNull(Numbers.positionNumber(null));
    assertNull(Numbers.positionNumber("1" + "0".repeat(38)));
  }

  @Test
  void longsAreIntegerTextOnly() {
    assertEquals(42L, Numbers.parseLong(" 42 "));
    assertEquals(42L, Numbers.parseLong("+42"));
    assertNull(Numbers.parseLong("4.2"));
    assertNull(Numbers.parseLong("x"));
    assertNull(Numbers.parseLong("99999999999999999999"));
  }
}
