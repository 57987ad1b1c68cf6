package dev.cdclake.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.Arrays;
import java.util.Locale;

/** The fields of an envelope's {@code source} block the decoders use, as text (numbers and booleans alike). */
final class Source {
  static final int CONNECTOR = 0;
  static final int NAME = 1;
  static final int TS_MS = 2;
  static final int TS_US = 3;
  static final int TS_SEC = 4;
  static final int SNAPSHOT = 5;
  static final int DB = 6;
  static final int SCHEMA = 7;
  static final int TABLE = 8;
  static final int COLLECTION = 9;
  static final int SEQUENCE = 10;
  static final int LSN = 11;
  static final int FILE = 12;
  static final int POS = 13;
  static final int ROW = 14;
  static final int ORD = 15;
  static final int COMMIT_LSN = 16;
  static final int CHANGE_LSN = 17;
  private static final int SLOTS = 18;

  final String[] values = new String[SLOTS];
  /** the block was an object */
  boolean present;
  /** the block was neither an object nor null */
  boolean notObject;

  private static int slot(String name) {
    switch (name) {
      case "connector":
        return CONNECTOR;
      case "name":
        return NAME;
      case "ts_ms":
        return TS_MS;
      case "ts_us":
        return TS_US;
      case "ts_sec":
        return TS_SEC;
      case "snapshot":
        return SNAPSHOT;
      case "db":
        return DB;
      case "schema":
        return SCHEMA;
      case "table":
        return TABLE;
      case "collection":
        return COLLECTION;
      case "sequence":
        return SEQUENCE;
      case "lsn":
        return LSN;
      case "file":
        return FILE;
      case "pos":
        return POS;
      case "row":
        return ROW;
      case "ord":
        return ORD;
      case "commit_lsn":
        return COMMIT_LSN;
      case "change_lsn":
        return CHANGE_LSN;
      default:
        return -1;
    }
  }

  void reset() {
    Arrays.fill(values, null);
    present = false;
    notObject = false;
  }

  String get(int slot) {
    return values[slot];
  }

  /** Reads the block at the current token (an object, or null; anything else sets {@link #notObject}). */
  void read(JsonParser p, JsonToken t) throws IOException {
    if (t == JsonToken.VALUE_NULL) {
      return;
    }
    if (t != JsonToken.START_OBJECT) {
      notObject = true;
      p.skipChildren();
      return;
    }
    present = true;
    for (JsonToken f = p.nextToken(); f == JsonToken.FIELD_NAME; f = p.nextToken()) {
      int slot = slot(p.currentName());
      JsonToken v = p.nextToken();
      if (slot < 0) {
        p.skipChildren();
      } else {
        values[slot] = Json.text(p, v);
      }
    }
  }

  /** {@code source.snapshot} normalised: lower case, null for false, empty or absent. */
  String snapshot() {
    String raw = values[SNAPSHOT];
    if (raw == null) {
      return null;
    }
    String t = raw.strip().toLowerCase(Locale.ROOT);
    return t.isEmpty() || t.equals("false") ? null : t;
  }

  /** {@code source.ts_us}, else {@code ts_ms}, else {@code ts_sec}, as microseconds; null if none is a number. */
  Long micros() {
    Long us = Numbers.parseLong(values[TS_US]);
    if (us != null) {
      return us;
    }
    Long ms = Numbers.parseLong(values[TS_MS]);
    if (ms != null && ms <= Long.MAX_VALUE / 1000 && ms >= Long.MIN_VALUE / 1000) {
      return ms * 1000;
    }
    Long s = Numbers.parseLong(values[TS_SEC]);
    if (s != null && s <= Long.MAX_VALUE / 1_000_000 && s >= Long.MIN_VALUE / 1_000_000) {
      return s * 1_000_000;
    }
    return null;
  }

  /** {@code source.connector} in lower case, or null. */
  String connector() {
    String c = values[CONNECTOR];
    return c == null ? null : c.toLowerCase(Locale.ROOT);
  }
}
