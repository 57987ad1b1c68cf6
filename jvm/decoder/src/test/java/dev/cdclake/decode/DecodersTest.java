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
    assertEquals("invalid_json", reason(plan, event("c", "null", "{\"id\":1,\"amount\":NaN}")));
    assertEquals("invalid_json", reason(plan, "[".repeat(20_000) + "]".repeat(20_000)));
    assertEquals("type_mismatch", reason(plan, event("c", "null", "{\"id\":\"abc\"}")));
    assertEquals("type_mismatch", reason(plan, event("c", "null", "{\"id\":3000000000}")));
    assertEquals("not_an_object", reason(plan, "[1,2]"));
    assertEquals("not_an_object", reason(plan, "42"));
    assertEquals("missing_payload", reason(plan, "null"));
    assertEquals("missing_source", reason(plan, "{\"after\":{\"id\":1}}"));
    assertEquals("missing_op", reason(plan, "{\"after\":{\"id\":1},\"source\":{\"lsn\":1}}"));
    assertEquals("unknown_op", reason(plan, event("x", "null", "{\"id\":1}")));
    assertEquals("unsupported_connector", reason(plan, "{\"op\":\"c\",\"source\":{\"connector\":\"oracle\"}}"));
    assertEquals("invalid_source", reason(plan, "{\"op\":\"c\",\"after\":{\"id\":1},\"source\":\"pg\"}"));
    assertEquals("unknown_field", reason(plan, event("c", "null", "{\"id\":1,\"extra\":2}")));
    assertEquals("missing_after", reason(plan, event("c", "null", "null")));
    assertEquals("missing_after", reason(plan, event("u", "null", "null")));
    assertEquals("missing_before", reason(plan, event("d", "null", "null")));
    assertNull(reason(plan, event("d", "{\"id\":1}", "null")));
    assertEquals("invalid_position", reason(plan, event("c", "null", "{\"id\":1}").replace("\"lsn\":120", "\"lsn\":\"x\"")));
    assertEquals("invalid_position", reason(plan, event("c", "null", "{\"id\":1}").replace("\\\"100\\\"", "\\\"zz\\\"")));
    List<Object> wide = decode(plan, event("c", "null", "{\"id\":1,\"amount\":\"AYag\"}"));
    assertNull(wide.get(6));
    assertEquals(true, wide.get(7)); // 1000.00 does not fit decimal(5,2)
  }

  @Test
  void recordsAreCheckedAgainstTheirTopic() {
    String plan = plan(false, false).replace("\"kind\":\"data\",",
        "\"kind\":\"data\",\"identity\":{\"table\":\"t\"},\"key_columns\":[\"id\"],\"keyed\":true,"
            + "\"max_record_bytes\":4096,");
    String good = event("c", "null", "{\"id\":1}").replace("\"lsn\":120", "\"lsn\":120,\"table\":\"t\"");
    byte[] key = "{\"id\":1}".getBytes(StandardCharsets.UTF_8);
    Decoders.Decoder d = Decoders.of(plan);
    assertNull(d.decode(good.getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    assertEquals("missing_key", d.decode(good.getBytes(StandardCharsets.UTF_8), null, 0, 1L)[6]);
    // a truncate has no key; an incremental snapshot read may have no position fields
    assertNull(d.decode(good.replace("\"op\":\"c\"", "\"op\":\"t\"").getBytes(StandardCharsets.UTF_8), null, 0, 1L)[6]);
    String incremental = "{\"before\":null,\"after\":{\"id\":1},\"source\":{\"connector\":\"postgresql\","
        + "\"table\":\"t\",\"snapshot\":\"incremental\",\"lsn\":null,\"sequence\":\"[null,null]\"},\"op\":\"r\"}";
    assertNull(d.decode(incremental.getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    assertEquals("invalid_position",
        d.decode(incremental.replace("\"lsn\":null", "\"lsn\":\"x\"").getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    assertEquals("invalid_key", d.decode(good.getBytes(StandardCharsets.UTF_8), new byte[] {'{', 'x'}, 0, 1L)[6]);
    assertEquals("foreign_envelope",
        d.decode(good.replace("\"table\":\"t\"", "\"table\":\"u\"").getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    assertEquals("missing_key_value",
        d.decode(good.replace("{\"id\":1}", "{\"id\":null}").getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    String big = good.replace("{\"id\":1}", "{\"id\":1,\"note\":\"" + "x".repeat(5000) + "\"}");
    assertEquals("oversized_record", d.decode(big.getBytes(StandardCharsets.UTF_8), key, 0, 1L)[6]);
    byte[] latin1 = good.replace("{\"id\":1}", "{\"id\":1,\"note\":\"\u00e9\"}").getBytes(StandardCharsets.ISO_8859_1);
    assertEquals("invalid_utf8", d.decode(latin1, key, 0, 1L)[6]);
    byte[] utf8 = good.replace("{\"id\":1}", "{\"id\":1,\"note\":\"\u00e9\u20ac\ud83d\ude00\"}").getBytes(StandardCharsets.UTF_8);
    assertNull(d.decode(utf8, key, 0, 1L)[6]);
  }

  @Test
  void withSchemasTheWrapperHasOneSchemaAndOnePayload() {
    String plan = plan(true, false);
    String payload = event("c", "null", "{\"id\":1}");
    assertNull(reason(plan, PREFIX + payload + "}"));
    assertEquals("missing_schema", reason(plan, "{\"payload\":" + payload + "}"));
    assertEquals("missing_schema", reason(plan, "{\"schema\":null,\"payload\":" + payload + "}"));
    assertEquals("malformed_envelope", reason(plan, PREFIX + payload + ",\"extra\":1}"));
    assertEquals("malformed_envelope", reason(plan, PREFIX + payload + ",\"payload\":" + payload + "}"));
    assertEquals("not_an_object", reason(plan, "{\"schema\":" + SCHEMA + ",\"payload\":[1]}"));
  }

  @Test
  void withSchemasARecordOutsideTheSampledSchemaIsFlagged() {
    String plan = plan(true, false);
    String payload = event("c", "null", "{\"id\":1}");
    assertEquals(false, decode(plan, PREFIX + payload + "}").get(8));
    assertEquals(true, decode(plan, "{\"schema\":{\"type\":\"struct\"},\"payload\":" + payload + "}").get(8));
    assertEquals("missing_payload", reason(plan, "{\"schema\":{}}"));
  }

  private static final String TX_PLAN = "{\"kind\":\"transaction\",\"schemas\":true,\"prefixes\":[" + quote(PREFIX)
      + "],\"outputs\":[\"status\",\"tx_id\",\"event_count\",\"data_collections\",\"ts\",\"reason\"]}";

  private static List<Object> transaction(String payload) {
    return decode(TX_PLAN, PREFIX + payload + "}");
  }

  @Test
  void aTransactionEventDecodesItsStatusCountsAndTime() {
    List<Object> begin = transaction("{\"status\":\"begin\",\"id\":\"571:2\",\"ts_ms\":1700000000123}");
    assertEquals(Arrays.asList("BEGIN", "571:2", null, null), begin.subList(0, 4));
    assertEquals(java.time.Instant.ofEpochMilli(1700000000123L), begin.get(4));
    assertNull(begin.get(5));
    List<Object> end = transaction("{\"status\":\"END\",\"id\":571,\"event_count\":\"3\",\"data_collections\":"
        + "[{\"data_collection\":\"s.t\",\"event_count\":2},null,{\"data_collection\":\"s.u\",\"event_count\":\"x\"}],"
        + "\"ts_ms\":\"12\",\"extra\":{\"a\":[1]}}");
    assertEquals("571", end.get(1));
    assertEquals(3L, end.get(2));
    Object[] collections = (Object[]) end.get(3);
    assertEquals(org.apache.spark.sql.RowFactory.create("s.t", 2L), collections[0]);
    assertNull(collections[1]);
    assertEquals(org.apache.spark.sql.RowFactory.create("s.u", null), collections[2]);
    assertEquals(java.time.Instant.ofEpochMilli(12), end.get(4));
    assertNull(end.get(5));
    // a time out of range is null, not a failure
    assertNull(transaction("{\"status\":\"BEGIN\",\"id\":\"1\",\"ts_ms\":9223372036854775807}").get(4));
    // the record's schema text need not be the sampled one
    assertEquals("BEGIN", decode(TX_PLAN, "{\"schema\":{},\"payload\":{\"status\":\"BEGIN\",\"id\":\"1\"}}").get(0));
  }

  @Test
  void aTransactionEventsReasons() {
    assertEquals("unknown_tx_status", transaction("{\"status\":\"COMMIT\",\"id\":\"9\"}").get(5));
    assertEquals("unknown_tx_status", transaction("{\"id\":\"9\"}").get(5));
    assertEquals("missing_tx_id", transaction("{\"status\":\"END\",\"id\":null}").get(5));
    assertEquals("type_mismatch", transaction("{\"status\":\"END\",\"id\":\"1\",\"data_collections\":\"s.t\"}").get(5));
    assertEquals("type_mismatch", transaction("{\"status\":\"END\",\"id\":\"1\",\"data_collections\":[1]}").get(5));
    assertEquals("missing_payload", decode(TX_PLAN, PREFIX + "null}").get(5));
    assertEquals("invalid_json", decode(TX_PLAN, "{\"status\":").get(5));
    assertEquals("tombstone", decode(TX_PLAN, null).get(5));
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
