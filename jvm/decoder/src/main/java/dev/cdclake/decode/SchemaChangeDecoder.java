package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.Set;

/**
 * Events of a schema change topic (MySQL, MariaDB, Informix): {@code source}, {@code ts_ms},
 * {@code databaseName}, {@code schemaName}, {@code ddl} and {@code tableChanges} (kept as JSON text).
 *
 * <p>Plan: {@code position} (the dialect's position rule; null when the connector is unknown: no position),
 * {@code default_connector}, {@code outputs}. Reason after
 * the generic ones: {@code missing_ddl} (neither {@code ddl} nor {@code tableChanges}).
 */
final class SchemaChangeDecoder extends RecordDecoder {
  private static final Set<String> KNOWN = Set.of(
      "server", "connector", "database_name", "schema_name", "ddl", "table_changes", "source_ts", "ts",
      "position", "reason");

  private final Position position;
  private final String defaultConnector;
  private final String[] outputs;
  private final Source source = new Source();
  private String tsMs;
  private String database;
  private String schema;
  private String ddl;
  private String tableChanges;

  SchemaChangeDecoder(JsonNode plan) {
    super(plan);
    this.position = Position.of(plan.path("position").isTextual() ? plan.path("position").asText() : null);
    this.defaultConnector = plan.path("default_connector").isTextual() ? plan.path("default_connector").asText() : null;
    this.outputs = outputNames(plan, KNOWN, "a schema change topic");
  }

  @Override
  void reset() {
    source.reset();
    tsMs = database = schema = ddl = tableChanges = null;
  }

  @Override
  void field(String name, JsonParser p, JsonToken v, int start) throws IOException {
    switch (name) {
      case "source":
        source.read(p, v);
        break;
      case "ts_ms":
        tsMs = Json.text(p, v);
        break;
      case "databaseName":
        database = Json.text(p, v);
        break;
      case "schemaName":
        schema = Json.text(p, v);
        break;
      case "ddl":
        ddl = Json.text(p, v);
        break;
      case "tableChanges":
        tableChanges = Json.text(p, v);
        break;
      default:
        p.skipChildren();
    }
  }

  @Override
  Object[] outputs(int partition, long offset) {
    String reason = baseReason();
    if (reason == null && ddl == null && tableChanges == null) {
      reason = "missing_ddl";
    }
    Object[] out = new Object[outputs.length];
    for (int i = 0; i < outputs.length; i++) {
      switch (outputs[i]) {
        case "server":
          out[i] = source.get(Source.NAME);
          break;
        case "connector":
          String connector = source.connector();
          out[i] = connector != null ? connector : defaultConnector;
          break;
        case "database_name":
          out[i] = database;
          break;
        case "schema_name":
          out[i] = schema;
          break;
        case "ddl":
          out[i] = ddl;
          break;
        case "table_changes":
          out[i] = tableChanges;
          break;
        case "source_ts":
          out[i] = Times.instant(source.micros());
          break;
        case "ts":
          out[i] = Times.millis(tsMs);
          break;
        case "position":
          out[i] = position == null ? null : Position.full(position, source, source.snapshot(), partition, offset);
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
