package dev.cdclake.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.types.Decimal;
import org.junit.jupiter.api.Test;

/** The decoder on whole records, without Spark (plans as cdclake.decode writes them). */
class DecodersTest {
  private static final String SCHEMA = "{\"type\":\"struct\",\"fields\":[]}";
  private static final String PREFIX = "{\"schema\":" + SCHEMA + ",\"payload\":";

  private static String plan(boolean schemas, boolean includeBefore) {
    return "{\"kind\":\"data\",\"position\":\"postgresql\",\"connectors\":[\"postgresql\"],"
        + "\"default_connector\":\"postgresql\",\"schemas\":" + schemas + ",\"include_before\":" + includeBefore
        + ",\"prefixes\":[" + (schemas ? quote(PREFIX) : "") + "],\"check_sampled\":" + schemas + ","
        + "\"columns\":[{\"name\":\"id\",\"codec\":{\"type\":\"integral\",\"wire\":\"int\",\"as\":\"int\"}},"
        + "{\"name\":\"amount\",\"codec\":{\"type\":\"decimal\",\"precision\":5,\"scale\":2,\"placeholder\":true}},"
        + "{\"name\":\"note\",\"codec\":{\"type\":\"string\",\"placeholder\":true}}],"
        + "\"outputs\":[\"data\",\"op\",\"position\",\"keep_columns\",\"reason\",\"invalid\",\"unsampled\"]}";
  }

  private static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  private static String event(String op, String before, String after) {
    return "{\"before\":" + before + ",\"after\":" + after
        + ",\"source\":{\"connector\":\"postgresql\",\"sequence\":\"[\\\"100\\\",\\\"120\\\"]\",\"lsn\":120},"
        + "\"op\":\"" + op + "\"}";
  }

  private static List<Object> decode(String plan, String value) {
    byte[] bytes = value == null ? null : value.getBytes(StandardCharsets.UTF_8);
    return Arrays.asList(Decoders.of(plan).decode(bytes, 3, 42L));
  }

  private static String reason(String plan, String value) {
    return (String) decode(plan, value).get(6);
  }

  @Test
  void anInsertDecodesItsAfterImage() {
    List<Object> out = decode(plan(false, false), event("c", "null", "{\"id\":1,\"amount\":\"MDk=\",\"note\":\"x\"}"));
    assertEquals(1, out.get(0));
    assertEquals(Decimal.apply(new java.math.BigDecimal("123.45")), out.get(1));
    assertEquals("x", out.get(2));
    assertEquals("c", out.get(3));
    Object[] position = (Object[]) out.get(4);
    assertArrayEquals(
        new Object[] {Decimal.apply(100L), Decimal.apply(120L), Decimal.apply(1L), Decimal.apply(3L),
          Decimal.apply(42L)},
        position);
    assertEquals(0, ((Object[]) out.get(5)).length);
    assertNull(out.get(6));
    assertEquals(false, out.get(7));
  }

  @Test
  void aDeleteDecodesItsBeforeImageInBothPaths() {
    String before = "{\"id\":7,\"amount\":\"AQ==\",\"note\":\"gone\"}";
    for (boolean schemas : new boolean[] {false, true}) {
      for (boolean includeBefore : new boolean[] {false, true}) {
        String payload = event("d", before, "null");
        String value = schemas ? PREFIX + payload + "}" : payload;
        List<Object> out = decode(plan(schemas, includeBefore), value);
        assertEquals(7, out.get(0), value);
        assertEquals(Decimal.apply(new java.math.BigDecimal("0.01")), out.get(1));
        assertEquals("gone", out.get(2));
        assertNull(out.get(6));
        assertEquals(false, out.get(8));
      }
    }
  }

  @Test
  void placeholdersAreKeptColumnsNotValues() {
    String after = "{\"id\":1,\"amount\":\"" + Codec.UNAVAILABLE_BASE64 + "\",\"note\":\"" + Codec.UNAVAILABLE + "\"}";
    List<Object> out = decode(plan(false, false), event("u", "null", after));
    assertNull(out.get(1));
    assertNull(out.get(2));
    assertArrayEquals(new Object[] {"amount", "note"}, (Object[]) out.get(5));
    assertNull(out.get(6));
  }

  @Test
  void reasonsInTheirOrder() {
    String plan = plan(false, false);
    assertEquals("tombstone", reason(plan, null));
    assertEquals("invalid_json", reason(plan, "{\"op\":"));
    assertEquals("invalid_json", reason(plan, ""));
    assertEquals("invalid_json", reason(plan, event("c", "null", "{\"id\":1}") + " x"));
    assertEquals("type_mismatch", reason(plan, event("c", "null", "{\"id\":\"abc\"}")));
    assertEquals("type_mismatch", reason(plan, event("c", "null", "{\"id\":3000000000}")));
    assertEquals("type_mismatch", reason(plan, "[1,2]"));
    assertEquals("missing_payload", reason(plan, "null"));
    assertEquals("missing_op", reason(plan, "{\"after\":{\"id\":1}}"));
    assertEquals("unknown_op", reason(plan, event("x", "null", "{\"id\":1}")));
    assertEquals("unsupported_connector", reason(plan, "{\"op\":\"c\",\"source\":{\"connector\":\"oracle\"}}"));
    List<Object> wide = decode(plan, event("c", "null", "{\"id\":1,\"amount\":\"AYag\"}"));
    assertNull(wide.get(6));
    assertEquals(true, wide.get(7)); // 1000.00 does not fit decimal(5,2)
  }

  @Test
  void withSchemasARecordOutsideTheSampledSchemaIsFlagged() {
    String plan = plan(true, false);
    String payload = event("c", "null", "{\"id\":1}");
    assertEquals(false, decode(plan, PREFIX + payload + "}").get(8));
    assertEquals(true, decode(plan, "{\"schema\":{\"type\":\"struct\"},\"payload\":" + payload + "}").get(8));
    assertEquals("missing_payload", reason(plan, "{\"schema\":{}}"));
  }

  @Test
  void badPlansAreRefusedWithTheirReason() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Decoders.of("{\"kind\":\"x\"}"));
    assertTrue(e.getMessage().contains("unknown kind"));
    e = assertThrows(IllegalArgumentException.class, () -> Decoders.of(
        "{\"kind\":\"data\",\"position\":\"postgresql\",\"columns\":[],\"outputs\":[\"nope\"]}"));
    assertTrue(e.getMessage().contains("unknown output 'nope'"));
  }
}
