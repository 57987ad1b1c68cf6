package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.apache.spark.sql.RowFactory;

/**
 * BEGIN/END events of a transaction topic ({@code <prefix>.transaction}): {@code status}, {@code id},
 * {@code event_count}, {@code data_collections} and {@code ts_ms}.
 *
 * <p>Plan: {@code schemas}, {@code prefixes} (the topic's sampled schema texts: a record that starts with one is
 * parsed from its payload on), {@code outputs}. Values are read as Spark's {@code from_json} reads a field of
 * string type (strings as they are, other scalars as written), then: {@code status} upper-cased,
 * {@code event_count} and {@code ts_ms} integers ({@link Numbers#parseLong}: null when not one),
 * {@code ts} null when out of Spark's range. {@code data_collections} that is not an array, or an element that is
 * neither an object nor null, is a {@code type_mismatch}. Reasons after the generic ones:
 * {@code unknown_tx_status} (not BEGIN or END), {@code missing_tx_id}.
 */
final class TransactionDecoder extends RecordDecoder {
  private static final Set<String> KNOWN =
      Set.of("status", "tx_id", "event_count", "data_collections", "ts", "reason");

  private final String[] outputs;
  private String status;
  private String id;
  private String eventCount;
  private String tsMs;
  private Object[] collections;
  private final List<Object> elements = new ArrayList<>();

  TransactionDecoder(JsonNode plan) {
    super(plan);
    this.outputs = outputNames(plan, KNOWN, "a transaction topic");
  }

  @Override
  void reset() {
    status = id = eventCount = tsMs = null;
    collections = null;
  }

  @Override
  void field(String name, JsonParser p, JsonToken v, int start) throws IOException {
    switch (name) {
      case "status":
        status = Json.text(p, v);
        break;
      case "id":
        id = Json.text(p, v);
        break;
      case "event_count":
        eventCount = Json.text(p, v);
        break;
      case "ts_ms":
        tsMs = Json.text(p, v);
        break;
      case "data_collections":
        collections = collections(p, v);
        break;
      default:
        p.skipChildren();
    }
  }

  /** The array at token {@code t}: one row (data collection, event count) per object, null for a null. */
  private Object[] collections(JsonParser p, JsonToken t) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      return null;
    }
    if (t != JsonToken.START_ARRAY) {
      problems.mismatch = true;
      p.skipChildren();
      return null;
    }
    elements.clear();
    for (JsonToken e = p.nextToken(); e != JsonToken.END_ARRAY; e = p.nextToken()) {
      if (e == JsonToken.VALUE_NULL) {
        elements.add(null);
      } else if (e != JsonToken.START_OBJECT) {
        problems.mismatch = true;
        p.skipChildren();
      } else {
        String collection = null;
        String count = null;
        for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
          String name = p.currentName();
          JsonToken v = p.nextToken();
          if ("data_collection".equals(name)) {
            collection = Json.text(p, v);
          } else if ("event_count".equals(name)) {
            count = Json.text(p, v);
          } else {
            p.skipChildren();
          }
        }
        elements.add(RowFactory.create(collection, Numbers.parseLong(count)));
      }
    }
    return elements.toArray();
  }

  @Override
  Object[] outputs(int partition, long offset) {
    String reason = baseReason();
    String upper = status == null ? null : status.toUpperCase(Locale.ROOT);
    if (reason == null && !"BEGIN".equals(upper) && !"END".equals(upper)) {
      reason = "unknown_tx_status";
    } else if (reason == null && id == null) {
      reason = "missing_tx_id";
    }
    Object[] out = new Object[outputs.length];
    for (int i = 0; i < outputs.length; i++) {
      switch (outputs[i]) {
        case "status":
          out[i] = upper;
          break;
        case "tx_id":
          out[i] = id;
          break;
        case "event_count":
          out[i] = Numbers.parseLong(eventCount);
          break;
        case "data_collections":
          out[i] = collections;
          break;
        case "ts":
          out[i] = Times.millis(tsMs);
          break;
        case "reason":
          out[i] = reason;
          break;
        default:
          throw new AssertionError(outputs[i]);
      }
    }
    return out;
  }
}
