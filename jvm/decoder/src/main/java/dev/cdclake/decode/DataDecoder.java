package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.RowFactory;

/**
 * Change events of a data topic: the row image (after-image, before-image for deletes) converted column by
 * column, and the envelope's metadata (see docs/decoding.md, "Output contract").
 *
 * <p>Plan: {@code position} (the dialect's position rule), {@code connectors} (accepted {@code source.connector} values) and
 * {@code default_connector}, {@code document_store} (MongoDB: images are JSON text), {@code include_before}
 * (convert the before-image of every event, not only of deletes), {@code check_sampled} (flag a usable record
 * that does not start with a sampled schema text), {@code columns} ({@code name}, {@code codec}) and
 * {@code outputs} (names, in order; {@code data} stands for every column).
 *
 * <p>Plan, for the checks of the envelope against its topic: {@code identity} (the topic's table: the source
 * block's {@code db}, {@code schema}, {@code table} or {@code collection} the planner chose; a record naming
 * another is a {@code foreign_envelope}), {@code key_columns} (the columns of the table's key) and
 * {@code keyed} (every record of the topic has a Kafka key).
 *
 * <p>Reasons after the structural ones ({@link RecordDecoder#structuralReason}), in this order:
 * {@code missing_source}, {@code invalid_source} (not an object), {@code unsupported_connector} (a connector
 * the dialect does not decode), {@code foreign_envelope}, {@code missing_op}, {@code unknown_op},
 * {@code type_mismatch}, {@code unknown_field} (a row image field the schema does not have),
 * {@code missing_after} ({@code c}, {@code u} or {@code r} without an after-image), {@code missing_before}
 * ({@code d} without a before-image), {@code missing_key_value} (a key column null in the image),
 * {@code invalid_position} (see {@link Position#usable}), {@code missing_key} (a keyed topic's row event without
 * a key; a truncate has none), {@code invalid_key} (a key that is not a JSON object).
 */
final class DataDecoder extends RecordDecoder {
  private static final Set<String> OPS = Set.of("r", "c", "u", "d", "t", "m");
  private static final Object[] NO_NAMES = new Object[0];
  private static final Codec.Struct TRANSACTION = textStruct("id", "total_order", "data_collection_order");
  private static final Codec.Struct MESSAGE = textStruct("prefix", "content");
  private static final Codec.Struct UPDATE_DESCRIPTION = new Codec.Struct(
      new String[] {"updatedFields", "removedFields", "truncatedArrays"},
      new Codec[] {
        new Codec.Text(false),
        new Codec.Array(new Codec.Text(false), false),
        new Codec.Array(
            new Codec.Struct(
                new String[] {"field", "size"},
                new Codec[] {new Codec.Text(false), new Codec.Integral(true, Codec.Integral.As.INT, 64)}),
            false)
      });

  private final Position position;
  private final Set<String> connectors = new HashSet<>();
  private final String defaultConnector;
  private final boolean document;
  private final boolean includeBefore;
  private final boolean checkSampled;
  private final boolean schemas;
  private final Codec.Struct row;
  private final String[] outputs;
  /** expected source block values by {@link Source} slot (null: not checked) */
  private final String[] identity = new String[Source.CHANGE_LSN + 1];
  private final int[] keyColumns;
  private final boolean keyed;
  private boolean keyMissing;
  private boolean keyInvalid;

  private final Source source = new Source();
  private final Object[] after;
  private final Object[] before;
  private final Object[] tx = new Object[3];
  private final Object[] message = new Object[2];
  private final Object[] update = new Object[3];
  private boolean afterPresent;
  private boolean beforePresent;
  private boolean beforeConverted;
  private boolean[] afterPlaceholders;
  private boolean[] beforePlaceholders;
  private int beforeFrom;
  private int beforeTo;
  private String op;
  private String afterText;
  private String beforeText;
  private String patch;
  private String filter;
  private boolean txPresent;
  private boolean messagePresent;
  private boolean updatePresent;

  DataDecoder(JsonNode plan) {
    super(plan);
    this.position = Position.of(plan.path("position").asText(""));
    for (JsonNode c : plan.path("connectors")) {
      connectors.add(c.asText());
    }
    this.defaultConnector = plan.path("default_connector").asText("");
    this.document = plan.path("document_store").asBoolean(false);
    this.includeBefore = plan.path("include_before").asBoolean(false);
    this.checkSampled = plan.path("check_sampled").asBoolean(false);
    this.schemas = plan.path("schemas").asBoolean(false);
    this.row = Codec.Struct.of(plan.path("columns"));
    this.row.strict = !document;
    JsonNode id = plan.path("identity");
    for (String name : new String[] {"db", "schema", "table", "collection"}) {
      if (id.path(name).isTextual()) {
        identity[slotOf(name)] = id.path(name).asText();
      }
    }
    List<Integer> keys = new ArrayList<>();
    for (JsonNode k : plan.path("key_columns")) {
      for (int i = 0; i < row.size(); i++) {
        if (row.names[i].equals(k.asText())) {
          keys.add(i);
        }
      }
    }
    this.keyColumns = keys.stream().mapToInt(Integer::intValue).toArray();
    this.keyed = plan.path("keyed").asBoolean(false);
    this.after = new Object[row.size()];
    this.before = new Object[row.size()];
    List<String> names = new ArrayList<>();
    for (JsonNode o : plan.path("outputs")) {
      String name = o.asText();
      if (!KNOWN.contains(name)) {
        throw new IllegalArgumentException("decode plan: unknown output '" + name + "' of a data topic");
      }
      names.add(name);
    }
    this.outputs = names.toArray(new String[0]);
  }

  private static int slotOf(String name) {
    switch (name) {
      case "db":
        return Source.DB;
      case "schema":
        return Source.SCHEMA;
      case "table":
        return Source.TABLE;
      default:
        return Source.COLLECTION;
    }
  }

  @Override
  void readKey(byte[] key) {
    keyMissing = key == null;
    keyInvalid = false;
    if (key == null || !keyed) {
      return;
    }
    try (JsonParser p = factory.createParser(key)) {
      keyInvalid = p.nextToken() != JsonToken.START_OBJECT;
      if (!keyInvalid) {
        p.skipChildren();
        keyInvalid = p.nextToken() != null;
      }
    } catch (IOException | RuntimeException e) {
      keyInvalid = true;
    }
  }

  private static final Set<String> KNOWN = Set.of(
      "data", "document", "op", "position", "source_ts", "tx_id", "tx_total_order", "tx_data_collection_order",
      "snapshot", "connector", "db", "schema", "table", "keep_columns", "before", "patch", "filter",
      "updated_fields", "removed_fields", "truncated_arrays", "message_prefix", "message_content", "reason",
      "invalid", "unsampled");

  @Override
  void reset() {
    source.reset();
    java.util.Arrays.fill(after, null);
    java.util.Arrays.fill(before, null);
    java.util.Arrays.fill(tx, null);
    java.util.Arrays.fill(message, null);
    java.util.Arrays.fill(update, null);
    afterPresent = beforePresent = beforeConverted = false;
    afterPlaceholders = beforePlaceholders = null;
    op = afterText = beforeText = patch = filter = null;
    txPresent = messagePresent = updatePresent = false;
  }

  @Override
  void field(String name, JsonParser p, JsonToken v, int start) throws IOException {
    switch (name) {
      case "after":
        if (document) {
          afterText = Json.text(p, v);
        } else {
          afterPresent = image(p, v, after, true);
          afterPlaceholders = lastPlaceholders;
        }
        break;
      case "before":
        if (document) {
          beforeText = Json.text(p, v);
        } else {
          beforeFrom = start + (int) p.currentTokenLocation().getByteOffset();
          beforePresent = image(p, v, before, includeBefore);
          beforePlaceholders = lastPlaceholders;
          beforeConverted = includeBefore;
          beforeTo = start + (int) p.currentLocation().getByteOffset();
        }
        break;
      case "source":
        source.read(p, v);
        break;
      case "op":
        op = Json.text(p, v);
        break;
      case "transaction":
        txPresent = struct(p, v, TRANSACTION, tx);
        break;
      case "message":
        messagePresent = struct(p, v, MESSAGE, message);
        break;
      case "patch":
        patch = documentText(p, v);
        break;
      case "filter":
        filter = documentText(p, v);
        break;
      case "updateDescription":
        if (document) {
          updatePresent = struct(p, v, UPDATE_DESCRIPTION, update);
        } else {
          p.skipChildren();
        }
        break;
      default:
        p.skipChildren();
    }
  }

  /** A MongoDB document field's text (extended JSON); skipped (null) for other connectors. */
  private String documentText(JsonParser p, JsonToken v) throws IOException {
    if (!document) {
      p.skipChildren();
      return null;
    }
    return Json.text(p, v);
  }

  private boolean[] lastPlaceholders;

  /** Reads a row image into {@code out}; true when it is an object (false for null or a mismatch). */
  private boolean image(JsonParser p, JsonToken t, Object[] out, boolean convert) throws IOException {
    lastPlaceholders = null;
    if (t == JsonToken.VALUE_NULL) {
      return false;
    }
    if (t != JsonToken.START_OBJECT) {
      Codec.mismatch(p, problems);
      return false;
    }
    lastPlaceholders = row.readInto(p, out, problems, convert);
    return true;
  }

  private boolean struct(JsonParser p, JsonToken t, Codec.Struct codec, Object[] out) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      return false;
    }
    if (t != JsonToken.START_OBJECT) {
      Codec.mismatch(p, problems);
      return false;
    }
    codec.readInto(p, out, problems, true);
    return true;
  }

  /** A delete's before-image is its data: convert it if it was only checked. */
  private void convertBefore() {
    if (beforeConverted || !beforePresent) {
      return;
    }
    beforeConverted = true;
    try (JsonParser p = parser(beforeFrom, beforeTo)) {
      beforePlaceholders = row.readInto(skipTo(p), before, problems, true);
    } catch (IOException e) {
      throw new IllegalStateException("before-image no longer parses", e);
    }
  }

  private static JsonParser skipTo(JsonParser p) throws IOException {
    if (p.nextToken() != JsonToken.START_OBJECT) {
      throw new IllegalStateException("before-image does not start with an object");
    }
    return p;
  }

  private String reason() {
    String base = structuralReason();
    if (base != null) {
      return base;
    }
    if (source.notObject) {
      return "invalid_source";
    }
    if (!source.present) {
      return "missing_source";
    }
    String connector = source.connector();
    if (!connectors.contains(connector == null ? defaultConnector : connector)) {
      return "unsupported_connector";
    }
    for (int slot = 0; slot < identity.length; slot++) {
      if (identity[slot] != null && !identity[slot].equals(source.get(slot))) {
        return "foreign_envelope";
      }
    }
    if (op == null) {
      return "missing_op";
    }
    if (!OPS.contains(op)) {
      return "unknown_op";
    }
    if (problems.mismatch) {
      return "type_mismatch";
    }
    if (problems.unknownField) {
      return "unknown_field";
    }
    boolean change = op.equals("c") || op.equals("u") || op.equals("r");
    if (change && (document ? afterText == null && !op.equals("u") : !afterPresent)) {
      return "missing_after";
    }
    if (op.equals("d") && !document && !beforePresent) {
      return "missing_before";
    }
    if (!document && (change || op.equals("d")) && keyValueMissing(op.equals("d") ? before : after)) {
      return "missing_key_value";
    }
    if (position != null && !position.usable(source, !"incremental".equals(source.snapshot()))) {
      return "invalid_position";
    }
    // a truncate (and a logical decoding message) has no key: only row events are keyed
    boolean row = change || op.equals("d");
    if (keyed && row && keyMissing) {
      return "missing_key";
    }
    if (keyed && row && keyInvalid) {
      return "invalid_key";
    }
    return null;
  }

  private boolean keyValueMissing(Object[] image) {
    for (int i : keyColumns) {
      if (image[i] == null) {
        return true;
      }
    }
    return false;
  }

  @Override
  Object[] outputs(int partition, long offset) {
    boolean delete = "d".equals(op);
    if (delete && !document && structuralReason() == null && !problems.mismatch) {
      convertBefore();
    }
    String reason = reason();
    Object[] image = delete ? before : after;
    boolean imagePresent = delete ? beforePresent : afterPresent;
    boolean[] placeholders = delete ? beforePlaceholders : afterPlaceholders;
    List<Object> out = new ArrayList<>(outputs.length + row.size());
    String snapshot = source.snapshot();
    for (String name : outputs) {
      switch (name) {
        case "data":
          for (int i = 0; i < row.size(); i++) {
            out.add(imagePresent ? image[i] : null);
          }
          break;
        case "document":
          out.add(delete ? beforeText : afterText);
          break;
        case "op":
          out.add(op);
          break;
        case "position":
          out.add(Position.full(position, source, snapshot, partition, offset));
          break;
        case "source_ts":
          Long micros = source.micros();
          out.add(Times.instant(micros));
          break;
        case "tx_id":
          out.add(txPresent ? tx[0] : null);
          break;
        case "tx_total_order":
          out.add(txPresent ? Numbers.parseLong((String) tx[1]) : null);
          break;
        case "tx_data_collection_order":
          out.add(txPresent ? Numbers.parseLong((String) tx[2]) : null);
          break;
        case "snapshot":
          out.add(snapshot);
          break;
        case "connector":
          out.add(source.connector());
          break;
        case "db":
          out.add(source.get(Source.DB));
          break;
        case "schema":
          out.add(source.get(Source.SCHEMA));
          break;
        case "table":
          String table = source.get(Source.TABLE);
          out.add(table != null ? table : source.get(Source.COLLECTION));
          break;
        case "keep_columns":
          out.add(keep(imagePresent ? placeholders : null));
          break;
        case "before":
          if (document) {
            out.add(beforeText);
          } else {
            out.add(beforePresent && beforeConverted ? RowFactory.create(before.clone()) : null);
          }
          break;
        case "patch":
          out.add(patch);
          break;
        case "filter":
          out.add(filter);
          break;
        case "updated_fields":
          out.add(updatePresent ? update[0] : null);
          break;
        case "removed_fields":
          out.add(updatePresent ? update[1] : null);
          break;
        case "truncated_arrays":
          out.add(updatePresent ? update[2] : null);
          break;
        case "message_prefix":
          out.add(messagePresent ? message[0] : null);
          break;
        case "message_content":
          out.add(messagePresent ? base64OrNull((String) message[1]) : null);
          break;
        case "reason":
          out.add(reason);
          break;
        case "invalid":
          out.add(problems.invalid);
          break;
        case "unsampled":
          // any readable envelope of a schema version the sample did not show, whatever else is wrong with it:
          // the batch is decoded again with discovery by a pass, which plans (or refuses) that version
          out.add(checkSampled && schemas && !prefixMatched && structuralReason() == null);
          break;
        default:
          throw new AssertionError(name);
      }
    }
    return out.toArray();
  }

  private Object[] keep(boolean[] placeholders) {
    if (placeholders == null) {
      return NO_NAMES;
    }
    List<Object> names = new ArrayList<>();
    for (int i = 0; i < placeholders.length; i++) {
      if (placeholders[i]) {
        names.add(row.names[i]);
      }
    }
    return names.toArray();
  }

  private static byte[] base64OrNull(String text) {
    if (text == null) {
      return null;
    }
    try {
      return Numbers.base64(text);
    } catch (Numbers.NotBase64 e) {
      return null;
    }
  }

  private static Codec.Struct textStruct(String... names) {
    Codec[] codecs = new Codec[names.length];
    for (int i = 0; i < names.length; i++) {
      codecs[i] = new Codec.Text(false);
    }
    return new Codec.Struct(names, codecs);
  }
}
