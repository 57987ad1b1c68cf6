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
 * {@code invalid_json}, {@code type_mismatch} (a value of the wrong JSON type for its column),
 * {@code missing_payload}, then the reasons of the kind of topic. A decoder never throws for a record: an
 * unexpected failure is the reason {@code decoder_error: ...}.
 */
abstract class RecordDecoder {
  static final String TOMBSTONE = "tombstone";

  private final JsonFactory factory = Json.factory();
  private final boolean schemas;
  private final byte[][] prefixes;
  final Problems problems = new Problems();

  private boolean tombstone;
  private boolean syntax;
  private RuntimeException error;
  /** the payload was null or absent */
  boolean payloadNull;
  /** the record starts with a sampled schema text */
  boolean prefixMatched;
  /** the value being decoded */
  byte[] record;

  RecordDecoder(JsonNode plan) {
    this.schemas = plan.path("schemas").asBoolean(false);
    List<byte[]> texts = new ArrayList<>();
    for (JsonNode prefix : plan.path("prefixes")) {
      texts.add(prefix.asText().getBytes(StandardCharsets.UTF_8));
    }
    this.prefixes = texts.toArray(new byte[0][]);
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
      default:
        throw new IllegalArgumentException("decode plan: unknown kind '" + kind + "'");
    }
  }

  /** The outputs of one record, in the plan's order. */
  final Object[] decode(byte[] value, int partition, long offset) {
    reset();
    problems.reset();
    tombstone = value == null;
    syntax = false;
    error = null;
    payloadNull = false;
    prefixMatched = false;
    record = value;
    if (!tombstone) {
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
          Codec.mismatch(p, problems);
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
    return false;
  }

  /** The fields of the {schema, payload} wrapper after its opening brace, up to its closing brace. */
  private void wrapperRest(JsonParser p) throws IOException {
    JsonToken t;
    for (t = p.nextToken(); t == JsonToken.FIELD_NAME; t = p.nextToken()) {
      boolean isPayload = "payload".equals(p.currentName());
      JsonToken v = p.nextToken();
      if (isPayload) {
        reset();
        payloadNull = false;
        payload(p, v, 0);
      } else {
        p.skipChildren();
      }
    }
    if (t != JsonToken.END_OBJECT) {
      syntax = true;
    }
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
      Codec.mismatch(p, problems);
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

  /** The generic reason, or null when the envelope itself is readable and present. */
  final String baseReason() {
    if (tombstone) {
      return TOMBSTONE;
    }
    if (syntax) {
      return "invalid_json";
    }
    if (error != null) {
      return "decoder_error: " + error;
    }
    if (problems.mismatch) {
      return "type_mismatch";
    }
    if (payloadNull) {
      return "missing_payload";
    }
    return null;
  }
}
