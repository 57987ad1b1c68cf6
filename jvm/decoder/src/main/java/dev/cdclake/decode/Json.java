package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.util.BufferRecycler;
import com.fasterxml.jackson.core.util.RecyclerPool;
import java.io.ByteArrayOutputStream;
import java.io.IOException;

/** JSON parsing helpers shared by the decoders: one factory per decoder instance, Spark's text rules. */
final class Json {
  private Json() {}

  /**
   * A factory for one thread. Its buffers are recycled through a pool of one (the decoder is used by one
   * task thread at a time): Jackson's default thread-local pool showed up as 13% of a decode profile.
   * Standard JSON only: Kafka Connect's JsonConverter writes NaN and the infinities as strings, so a bare
   * {@code NaN} literal is a syntax error. No limit on string length (TOASTed text and bytea can be large; the
   * plan's {@code max_record_bytes} bounds a record), nesting at most 1,000 deep.
   */
  static JsonFactory factory() {
    return JsonFactory.builder()
        .streamReadConstraints(
            StreamReadConstraints.builder()
                .maxStringLength(Integer.MAX_VALUE)
                .maxNumberLength(10_000)
                .maxNestingDepth(1_000)
                .build())
        .recyclerPool(new SinglePool())
        .build();
  }

  /** A recycler pool holding at most one recycler: no thread-local lookup, no lock. */
  private static final class SinglePool implements RecyclerPool<BufferRecycler> {
    private static final long serialVersionUID = 1L;
    private transient BufferRecycler free;

    @Override
    public BufferRecycler acquirePooled() {
      BufferRecycler r = free;
      if (r == null) {
        return new BufferRecycler();
      }
      free = null;
      return r;
    }

    @Override
    public void releasePooled(BufferRecycler recycler) {
      free = recycler;
    }
  }

  /**
   * The value at the current token as text, as Spark's {@code from_json} renders a value read with a string
   * type: strings as they are, other scalars as written, objects and arrays as compact JSON.
   */
  static String text(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case VALUE_STRING:
      case VALUE_NUMBER_INT:
      case VALUE_NUMBER_FLOAT:
      case VALUE_TRUE:
      case VALUE_FALSE:
        return p.getText();
      case VALUE_NULL:
        return null;
      default:
        return structure(p);
    }
  }

  /** The object or array at the current token, re-written as compact JSON (Spark's rendering of nested text). */
  static String structure(JsonParser p) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream(64);
    try (JsonGenerator g = GENERATORS.createGenerator(out)) {
      g.copyCurrentStructure(p);
    }
    return out.toString(java.nio.charset.StandardCharsets.UTF_8);
  }

  private static final JsonFactory GENERATORS = new JsonFactory();
}
