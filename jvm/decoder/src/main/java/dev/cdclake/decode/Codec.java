package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.Decimal;

/**
 * How one column's JSON value is read and converted to the Spark value of its planned type.
 *
 * <p>Each codec checks the value's JSON type against the column's wire type (what Spark's {@code from_json} would
 * accept: a mismatch makes the record a {@code type_mismatch} dead letter) and converts it (a value that cannot
 * be represented is flagged {@code invalid}). Values are the external types Spark converts from: Integer, Long,
 * Float, Double, Boolean, String, byte[], {@link Decimal}, LocalDate, LocalDateTime, Instant, Object[], Map, Row.
 * Codecs are built from the plan cdclake.decode.connect writes ({@link #of}).
 */
abstract class Codec {
  /** Returned instead of a value for Debezium's unavailable-value placeholder (PostgreSQL unchanged TOAST). */
  static final Object PLACEHOLDER = new Object();

  static final String UNAVAILABLE = "__debezium_unavailable_value";
  static final String UNAVAILABLE_BASE64 = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

  /**
   * Reads the value at the current token {@code t} (never {@code VALUE_NULL}, which callers read as null) and
   * leaves the parser on its last token.
   *
   * @param convert false: check the wire type only (nothing is converted or flagged invalid; returns null)
   */
  abstract Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException;

  /** Reads a value that may be JSON null. */
  final Object readNullable(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
    return t == JsonToken.VALUE_NULL ? null : read(p, t, problems, convert);
  }

  static Object mismatch(JsonParser p, Problems problems) throws IOException {
    problems.mismatch = true;
    p.skipChildren();
    return null;
  }

  static Object invalid(Problems problems) {
    problems.invalid = true;
    return null;
  }

  // -- plan ------------------------------------------------------------------------------------------------------

  static Codec of(JsonNode spec) {
    String type = spec.path("type").asText("");
    boolean placeholder = spec.path("placeholder").asBoolean(false);
    switch (type) {
      case "integral":
        return new Integral(
            spec.path("wire").asText("long").equals("int"),
            Integral.As.of(spec.path("as").asText("")),
            spec.path("bits").asInt(64));
      case "float":
        return new Floating(false);
      case "double":
        return new Floating(true);
      case "boolean":
        return new Bool();
      case "string":
        return new Text(placeholder, true);
      case "bytes":
        return new Bytes(placeholder);
      case "decimal":
        return new FixedDecimal(spec.path("precision").asInt(38), spec.path("scale").asInt(0), placeholder);
      case "decimal_text":
        return new DecimalText(spec.path("scale").asInt(0), placeholder);
      case "variable_scale_decimal":
        return new VariableScaleDecimal();
      case "zoned_timestamp":
        return new ZonedTimestamp();
      case "json_text":
        return new Text(false, true);
      case "array":
        return new Array(of(spec.path("items")), placeholder);
      case "map":
        return new StringMap(of(spec.path("values")));
      case "struct":
        return Struct.of(spec.path("fields"));
      default:
        throw new IllegalArgumentException("decode plan: unknown codec type '" + type + "' in " + spec);
    }
  }

  // -- scalars ---------------------------------------------------------------------------------------------------

  /** Integers on an int or long wire, converted to int, long, date, micros or a wall-clock timestamp. */
  static final class Integral extends Codec {
    enum As {
      INT, LONG, DATE, MICROS_FROM_MILLIS, MICROS_FROM_NANOS, TIMESTAMP_FROM_MILLIS, TIMESTAMP_FROM_MICROS,
      TIMESTAMP_FROM_NANOS;

      static As of(String name) {
        try {
          return valueOf(name.toUpperCase(java.util.Locale.ROOT));
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException("decode plan: unknown integral conversion '" + name + "'", e);
        }
      }
    }

    private final boolean intWire;
    private final As as;
    private final long min;
    private final long max;

    /** {@code bits}: the Connect type's width (8 for int8, 16 for int16); a wider value cannot be represented. */
    Integral(boolean intWire, As as, int bits) {
      this.intWire = intWire;
      this.as = as;
      this.min = bits >= 64 ? Long.MIN_VALUE : -(1L << (bits - 1));
      this.max = bits >= 64 ? Long.MAX_VALUE : (1L << (bits - 1)) - 1;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t != JsonToken.VALUE_NUMBER_INT) {
        return mismatch(p, problems);
      }
      long v;
      try {
        v = intWire ? p.getIntValue() : p.getLongValue();
      } catch (InputCoercionException e) {
        return mismatch(p, problems); // out of the wire type's range, as Spark's reader
      }
      if (!convert) {
        return null;
      }
      if (v < min || v > max) {
        return invalid(problems);
      }
      switch (as) {
        case INT:
          return intWire ? Integer.valueOf((int) v) : (v == (int) v ? Integer.valueOf((int) v) : invalid(problems));
        case LONG:
          return v;
        case DATE:
          return v == (int) v ? LocalDate.ofEpochDay(v) : invalid(problems);
        case MICROS_FROM_MILLIS:
          if (v > Long.MAX_VALUE / 1000 || v < Long.MIN_VALUE / 1000) {
            return invalid(problems);
          }
          return v * 1000L;
        case MICROS_FROM_NANOS:
          return Math.floorDiv(v, 1000L);
        case TIMESTAMP_FROM_MILLIS:
          if (v > Long.MAX_VALUE / 1000 || v < Long.MIN_VALUE / 1000) {
            return invalid(problems);
          }
          return wallClock(v * 1000L);
        case TIMESTAMP_FROM_MICROS:
          return wallClock(v);
        case TIMESTAMP_FROM_NANOS:
          return wallClock(Math.floorDiv(v, 1000L));
        default:
          throw new AssertionError(as);
      }
    }

    static LocalDateTime wallClock(long micros) {
      return LocalDateTime.ofEpochSecond(
          Math.floorDiv(micros, 1_000_000L), (int) Math.floorMod(micros, 1_000_000L) * 1000, ZoneOffset.UTC);
    }
  }

  /** float32 / float64, with the texts Spark's reader takes for NaN and the infinities. */
  static final class Floating extends Codec {
    private final boolean dbl;

    Floating(boolean dbl) {
      this.dbl = dbl;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      double v;
      if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
        if (!convert) {
          return null;
        }
        return dbl ? (Object) p.getDoubleValue() : (Object) p.getFloatValue();
      } else if (t == JsonToken.VALUE_STRING) {
        switch (p.getText()) {
          case "NaN":
            v = Double.NaN;
            break;
          case "Infinity":
          case "+Infinity":
          case "+INF":
            v = Double.POSITIVE_INFINITY;
            break;
          case "-Infinity":
          case "-INF":
            v = Double.NEGATIVE_INFINITY;
            break;
          default:
            return mismatch(p, problems);
        }
      } else {
        return mismatch(p, problems);
      }
      if (!convert) {
        return null;
      }
      return dbl ? (Object) v : (Object) (float) v;
    }
  }

  static final class Bool extends Codec {
    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t == JsonToken.VALUE_TRUE) {
        return Boolean.TRUE;
      }
      if (t == JsonToken.VALUE_FALSE) {
        return Boolean.FALSE;
      }
      return mismatch(p, problems);
    }
  }

  /** Text of any JSON value (Spark's string reading: objects and arrays as compact JSON). */
  static final class Text extends Codec {
    private final boolean placeholder;
    private final boolean strict;

    /** Lenient text: any JSON value, rendered as Spark's reader would (the envelope's own fields). */
    Text(boolean placeholder) {
      this(placeholder, false);
    }

    /** {@code strict}: a Connect STRING column, which JsonConverter always writes as a JSON string. */
    Text(boolean placeholder, boolean strict) {
      this.placeholder = placeholder;
      this.strict = strict;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (strict && t != JsonToken.VALUE_STRING) {
        return mismatch(p, problems);
      }
      if (!convert) {
        p.skipChildren();
        return null;
      }
      String text = Json.text(p, t);
      if (placeholder && t == JsonToken.VALUE_STRING && UNAVAILABLE.equals(text)) {
        return PLACEHOLDER;
      }
      return text;
    }
  }

  /** Base-64 text codecs share the window of the current string token (no String is made for it). */
  abstract static class Base64Text extends Codec {
    private final boolean placeholder;

    Base64Text(boolean placeholder) {
      this.placeholder = placeholder;
    }

    @Override
    final Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (!convert) {
        p.skipChildren();
        return null;
      }
      char[] chars;
      int off;
      int len;
      if (t == JsonToken.VALUE_STRING) {
        chars = p.getTextCharacters();
        off = p.getTextOffset();
        len = p.getTextLength();
        if (placeholder && isPlaceholder(chars, off, len)) {
          return PLACEHOLDER;
        }
      } else {
        String text = Json.text(p, t); // a number or a structure: Spark would try its text, which is never base64
        chars = text.toCharArray();
        off = 0;
        len = chars.length;
      }
      try {
        return convert(chars, off, len, problems);
      } catch (Numbers.NotBase64 e) {
        return invalid(problems);
      }
    }

    abstract Object convert(char[] chars, int off, int len, Problems problems) throws Numbers.NotBase64;

    private static boolean isPlaceholder(char[] chars, int off, int len) {
      if (len != UNAVAILABLE_BASE64.length()) {
        return false;
      }
      for (int i = 0; i < len; i++) {
        if (chars[off + i] != UNAVAILABLE_BASE64.charAt(i)) {
          return false;
        }
      }
      return true;
    }
  }

  static final class Bytes extends Base64Text {
    Bytes(boolean placeholder) {
      super(placeholder);
    }

    @Override
    Object convert(char[] chars, int off, int len, Problems problems) throws Numbers.NotBase64 {
      return Numbers.base64(chars, off, len);
    }
  }

  /** Kafka Connect {@code Decimal} into {@code decimal(p<=38, s)}; a value with more digits is invalid. */
  static final class FixedDecimal extends Base64Text {
    private final int precision;
    private final int scale;

    FixedDecimal(int precision, int scale, boolean placeholder) {
      super(placeholder);
      this.precision = precision;
      this.scale = scale;
    }

    @Override
    Object convert(char[] chars, int off, int len, Problems problems) throws Numbers.NotBase64 {
      Decimal d = Numbers.base64Length(chars, off, len) <= 8
          ? Numbers.decimal(Numbers.base64Long(chars, off, len), precision, scale)
          : Numbers.decimal(Numbers.unscaled(Numbers.base64(chars, off, len)), precision, scale);
      return d == null ? invalid(problems) : d;
    }
  }

  /** Kafka Connect {@code Decimal} wider than 38 digits: exact plain text at any width. */
  static final class DecimalText extends Base64Text {
    private final int scale;

    DecimalText(int scale, boolean placeholder) {
      super(placeholder);
      this.scale = scale;
    }

    @Override
    Object convert(char[] chars, int off, int len, Problems problems) throws Numbers.NotBase64 {
      return Numbers.plain(Numbers.unscaled(Numbers.base64(chars, off, len)), scale);
    }
  }

  /** {@code io.debezium.data.VariableScaleDecimal}: {@code {scale, value}} to exact plain text. */
  static final class VariableScaleDecimal extends Codec {
    private static final Integral SCALE = new Integral(true, Integral.As.INT, 64);

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t != JsonToken.START_OBJECT) {
        return mismatch(p, problems);
      }
      Integer scale = null;
      String value = null;
      boolean present = false;
      for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        if ("scale".equals(name)) {
          scale = (Integer) SCALE.readNullable(p, v, problems, convert);
        } else if ("value".equals(name)) {
          value = v == JsonToken.VALUE_NULL ? null : (convert ? Json.text(p, v) : skip(p));
          present = value != null;
        } else {
          p.skipChildren();
        }
      }
      if (!convert) {
        return null;
      }
      if (scale == null || !present) {
        return invalid(problems);
      }
      try {
        return Numbers.plain(Numbers.unscaled(Numbers.base64(value)), scale);
      } catch (Numbers.NotBase64 e) {
        return invalid(problems);
      }
    }

    private static String skip(JsonParser p) throws IOException {
      p.skipChildren();
      return "";
    }
  }

  /** {@code io.debezium.time.ZonedTimestamp}: ISO-8601 text with an offset, to a UTC instant. */
  static final class ZonedTimestamp extends Codec {
    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (!convert) {
        p.skipChildren();
        return null;
      }
      Object instant = Times.instant(Json.text(p, t));
      return instant == null ? invalid(problems) : instant;
    }
  }

  // -- containers ------------------------------------------------------------------------------------------------

  static final class Array extends Codec {
    private final Codec items;
    private final boolean placeholder;

    Array(Codec items, boolean placeholder) {
      this.items = items;
      this.placeholder = placeholder && (items instanceof Text || items instanceof Base64Text);
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t != JsonToken.START_ARRAY) {
        return mismatch(p, problems);
      }
      java.util.ArrayList<Object> out = convert ? new java.util.ArrayList<>() : null;
      boolean first = true;
      boolean hit = false;
      for (JsonToken e = p.nextToken(); e != JsonToken.END_ARRAY; e = p.nextToken()) {
        if (placeholder && first && convert && e == JsonToken.VALUE_STRING && UNAVAILABLE.equals(p.getText())) {
          hit = true;
        }
        first = false;
        Object value = items.readNullable(p, e, problems, convert);
        if (convert) {
          out.add(value == PLACEHOLDER ? null : value);
        }
      }
      if (!convert) {
        return null;
      }
      return hit ? PLACEHOLDER : out.toArray();
    }
  }

  /** A Connect map with string keys: a JSON object to {@code map<string, value>}. */
  static final class StringMap extends Codec {
    private final Codec values;

    StringMap(Codec values) {
      this.values = values;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t != JsonToken.START_OBJECT) {
        return mismatch(p, problems);
      }
      Map<String, Object> out = convert ? new LinkedHashMap<>() : null;
      for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
        String key = p.currentName();
        Object value = values.readNullable(p, p.nextToken(), problems, convert);
        if (convert) {
          out.put(key, value == PLACEHOLDER ? null : value);
        }
      }
      return out;
    }
  }

  /**
   * A Connect struct: a JSON object to a Row of its fields (missing ones null; unknown fields skipped, and
   * flagged {@link Problems#unknownField} when the struct is {@link #strict}).
   */
  static final class Struct extends Codec {
    final String[] names;
    final Codec[] codecs;
    private final Map<String, Integer> index = new HashMap<>();
    /** a field the plan does not know is a problem (a row image: its schema has no such column) */
    boolean strict;

    Struct(String[] names, Codec[] codecs) {
      this.names = names;
      this.codecs = codecs;
      for (int i = 0; i < names.length; i++) {
        index.put(names[i], i);
      }
    }

    static Struct of(JsonNode fields) {
      if (!fields.isArray()) {
        throw new IllegalArgumentException("decode plan: struct fields must be a list, got " + fields);
      }
      int n = fields.size();
      String[] names = new String[n];
      Codec[] codecs = new Codec[n];
      for (int i = 0; i < n; i++) {
        names[i] = fields.get(i).path("name").asText();
        codecs[i] = Codec.of(fields.get(i).path("codec"));
      }
      return new Struct(names, codecs);
    }

    int size() {
      return names.length;
    }

    /**
     * Reads the object at the current START_OBJECT token into {@code out} (one slot per field). Returns the
     * fields that held the unavailable-value placeholder (their slot is null), or null when none did.
     */
    boolean[] readInto(JsonParser p, Object[] out, Problems problems, boolean convert) throws IOException {
      boolean[] placeholders = null;
      int expected = 0;
      for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        int i;
        if (expected < names.length && names[expected].equals(name)) {
          i = expected; // fields usually come in schema order
        } else {
          Integer found = index.get(name);
          if (found == null) {
            problems.unknownField |= strict;
            p.skipChildren();
            continue;
          }
          i = found;
        }
        expected = i + 1;
        Object value = codecs[i].readNullable(p, v, problems, convert);
        if (value == PLACEHOLDER) {
          if (placeholders == null) {
            placeholders = new boolean[names.length];
          }
          placeholders[i] = true;
          value = null;
        }
        if (convert) {
          out[i] = value;
        }
      }
      return placeholders;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Problems problems, boolean convert) throws IOException {
      if (t != JsonToken.START_OBJECT) {
        return mismatch(p, problems);
      }
      Object[] values = convert ? new Object[names.length] : null;
      readInto(p, values, problems, convert);
      return convert ? RowFactory.create(values) : null;
    }
  }
}
