package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Decodes the value of one Kafka record of a topic into the outputs its plan names (one decoder per topic and
 * schema plan; not thread-safe: each Spark task uses its own copy).
 *
 * <p>The record is JsonConverter output: {@code {"schema":{...},"payload":{...}}} with schemas on, the bare
 * payload with schemas off. With schemas on, a record that starts with one of the schema texts discovery
 * sampled (the plan's {@code prefixes}: schema text and the {@code ,"payload":} delimiter) is parsed from its
 * payload on: the schema is neither tokenized nor checked, it is known byte for byte.
 *
 * <p>Why a record is unusable is its {@code reason}, in this order: {@code tombstone} (null value),
 * {@code oversized_record} (longer than the plan's {@code max_record_bytes}), {@code invalid_utf8},
 * {@code invalid_json} (a syntax error, an empty value, trailing content, nesting deeper than Jackson's limit,
 * the non-numeric literals {@code NaN}/{@code Infinity}), {@code not_an_object} (the value or its payload is
 * not a JSON object), {@code malformed_envelope} (with schemas on: a wrapper field other than one
 * {@code schema} and one {@code payload}), {@code missing_schema} (schemas on, no schema), {@code missing_payload},
 * then the reasons of the kind of topic ({@link #structuralReason}; {@link #baseReason} adds
 * {@code type_mismatch}, a value of the wrong JSON type for its column). A decoder never throws for a record: an
 * unexpected failure is the reason {@code decoder_error: ...}.
 */
abstract class RecordDecoder {
  static final String TOMBSTONE = "tombstone";

  final JsonFactory factory = Json.factory();
  private final boolean schemas;
  private final byte[][] prefixes;
  final Problems problems = new Problems();

  private final long maxBytes;
  private boolean tombstone;
  private boolean oversized;
  private boolean badUtf8;
  private boolean syntax;
  private boolean notObject;
  private boolean malformed;
  private boolean schemaMissing;
  private RuntimeException error;
  /** the payload was null or absent */
  boolean payloadNull;
  /** the record starts with a sampled schema text */
  boolean prefixMatched;
  /** the value being decoded */
  byte[] record;

  RecordDecoder(JsonNode plan) {
    this.schemas = plan.path("schemas").asBoolean(false);
    this.maxBytes = plan.path("max_record_bytes").asLong(0);
    List<byte[]> texts = new ArrayList<>();
    for (JsonNode prefix : plan.path("prefixes")) {
      texts.add(prefix.asText().getBytes(StandardCharsets.UTF_8));
    }
    this.prefixes = texts.toArray(new byte[0][]);
  }

  /**
   * The plan's {@code outputs}, each one of {@code known}.
   *
   * @throws IllegalArgumentException naming an output a decoder of {@code what} does not know
   */
  static String[] outputNames(JsonNode plan, Set<String> known, String what) {
    List<String> names = new ArrayList<>();
    for (JsonNode o : plan.path("outputs")) {
      if (!known.contains(o.asText())) {
        throw new IllegalArgumentException("decode plan: unknown output '" + o.asText() + "' of " + what);
      }
      names.add(o.asText());
    }
    return names.toArray(new String[0]);
  }

  /** The decoder a plan describes (the JSON cdclake.decode writes for each topic). */
  static RecordDecoder of(String planJson) {
    JsonNode plan;
    try {
      plan = new ObjectMapper().readTree(planJson);
    } catch (IOException e) {
      throw new IllegalArgumentException("decode plan is not JSON: " + e.getMessage(), e);
    }
    String kind = plan.path("kind").asText("");
    switch (kind) {
      case "data":
        return new DataDecoder(plan);
      case "schema_change":
        return new SchemaChangeDecoder(plan);
      case "transaction":
        return new TransactionDecoder(plan);
      default:
        throw new IllegalArgumentException("decode plan: unknown kind '" + kind + "'");
    }
  }

  /** The outputs of one record, in the plan's order ({@code key}: the record's key, null when it has none). */
  final Object[] decode(byte[] value, byte[] key, int partition, long offset) {
    reset();
    problems.reset();
    tombstone = value == null;
    oversized = !tombstone && maxBytes > 0 && value.length > maxBytes;
    badUtf8 = false;
    syntax = false;
    notObject = false;
    malformed = false;
    schemaMissing = false;
    error = null;
    payloadNull = false;
    prefixMatched = false;
    record = value;
    readKey(key);
    if (!tombstone && !oversized) {
      badUtf8 = !Utf8.valid(value);
    }
    if (!tombstone && !oversized && !badUtf8) {
      try {
        parse(value);
      } catch (IOException e) { // JsonParseException, and the stream constraints Jackson enforces
        syntax = true;
      } catch (RuntimeException e) {
        error = e;
      }
    }
    return outputs(partition, offset);
  }

  private void parse(byte[] v) throws IOException {
    int start = schemas ? matchedPrefix(v) : 0;
    prefixMatched = start > 0;
    if (prefixMatched && parsePayloadOnly(v, start)) {
      return;
    }
    try (JsonParser p = factory.createParser(v)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        syntax = true; // empty or blank value
        return;
      }
      if (schemas) {
        if (t == JsonToken.START_OBJECT) {
          payloadNull = true;
          wrapperRest(p);
        } else if (t == JsonToken.VALUE_NULL) {
          payloadNull = true;
        } else {
          notObject = true;
          p.skipChildren();
        }
      } else {
        payload(p, t, 0);
      }
      if (p.nextToken() != null) {
        syntax = true; // trailing content after the record's JSON value
      }
    }
  }

  /**
   * The fast path of a record that starts with a sampled schema text: the payload is parsed from where the
   * schema text ends to the wrapper's closing brace. False (nothing read) when the record is not
   * {@code <prefix><payload>}}: another field after the payload, or a syntax error, takes the full parse.
   */
  private boolean parsePayloadOnly(byte[] v, int start) throws IOException {
    int end = v.length;
    while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\n' || v[end - 1] == '\r' || v[end - 1] == '\t')) {
      end--;
    }
    if (end <= start || v[end - 1] != '}') {
      return false;
    }
    try (JsonParser p = factory.createParser(v, start, end - 1 - start)) {
      JsonToken t = p.nextToken();
      if (t == null) {
        return false;
      }
      payload(p, t, start);
      if (p.nextToken() == null) {
        return true;
      }
    } catch (IOException e) {
      // not the fast path's shape, or not JSON: the full parse decides
    }
    reset();
    problems.reset();
    payloadNull = false;
    notObject = false;
    return false;
  }

  /** The fields of the {schema, payload} wrapper after its opening brace, up to its closing brace. */
  private void wrapperRest(JsonParser p) throws IOException {
    JsonToken t;
    int schemaFields = 0;
    int payloadFields = 0;
    boolean schemaNull = false;
    for (t = p.nextToken(); t == JsonToken.FIELD_NAME; t = p.nextToken()) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if ("payload".equals(name)) {
        payloadFields++;
        reset();
        payloadNull = false;
        payload(p, v, 0);
      } else {
        if ("schema".equals(name)) {
          schemaFields++;
          schemaNull = v == JsonToken.VALUE_NULL;
        } else {
          malformed = true;
        }
        p.skipChildren();
      }
    }
    if (t != JsonToken.END_OBJECT) {
      syntax = true;
    }
    malformed |= schemaFields > 1 || payloadFields > 1;
    schemaMissing = schemaFields == 0 || schemaNull;
  }

  private int matchedPrefix(byte[] v) {
    for (byte[] prefix : prefixes) {
      if (prefix.length < v.length && java.util.Arrays.equals(v, 0, prefix.length, prefix, 0, prefix.length)) {
        return prefix.length;
      }
    }
    return 0;
  }

  /**
   * Reads the payload at token {@code t}: null (missing payload), a type mismatch, or an object whose fields
   * go to {@link #field} ({@code start}: where the parser's input begins in the record, for byte offsets of
   * the payload's parts).
   */
  final void payload(JsonParser p, JsonToken t, int start) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      payloadNull = true;
      return;
    }
    if (t != JsonToken.START_OBJECT) {
      notObject = true;
      p.skipChildren();
      return;
    }
    for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
      String name = p.currentName();
      field(name, p, p.nextToken(), start);
    }
  }

  /** Reads the payload's field {@code name}, whose value is at token {@code v} (skipped if not wanted). */
  abstract void field(String name, JsonParser p, JsonToken v, int start) throws IOException;

  /** Clears what {@link #payload} read. */
  abstract void reset();

  abstract Object[] outputs(int partition, long offset);

  /** A parser over bytes {@code [from, to)} of the record being decoded (to read a part again). */
  final JsonParser parser(int from, int to) throws IOException {
    return factory.createParser(record, from, to - from);
  }

  /** Reads what the decoder checks of the record's key (nothing by default). */
  void readKey(byte[] key) {}

  /** The reason the record's shape makes it unusable, or null when its envelope is readable and present. */
  final String structuralReason() {
    if (tombstone) {
      return TOMBSTONE;
    }
    if (oversized) {
      return "oversized_record";
    }
    if (badUtf8) {
      return "invalid_utf8";
    }
    if (syntax) {
      return "invalid_json";
    }
    if (error != null) {
      return "decoder_error: " + error;
    }
    if (notObject) {
      return "not_an_object";
    }
    if (malformed) {
      return "malformed_envelope";
    }
    if (schemaMissing) {
      return "missing_schema";
    }
    if (payloadNull) {
      return "missing_payload";
    }
    return null;
  }

  /** {@link #structuralReason}, then {@code type_mismatch}. */
  final String baseReason() {
    String structural = structuralReason();
    if (structural != null) {
      return structural;
    }
    return problems.mismatch ? "type_mismatch" : null;
  }
}
