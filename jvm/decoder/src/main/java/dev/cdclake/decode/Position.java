package dev.cdclake.decode;

import org.apache.spark.sql.types.Decimal;

/**
 * The connector's components of {@code _cdc_position}, most significant first, from the source block (see
 * docs/decoding.md, "Ordering positions"). Each is {@code decimal(38,0)}; a missing or non-numeric one is null
 * (the caller writes 0).
 */
abstract class Position {
  abstract Decimal[] parts(Source s);

  /**
   * True when the source block gives this connector's position: every component the connector always sends is
   * there and numeric (a record without one could not be ordered against the others). An incremental snapshot
   * read may lack them (it ranks below every streamed change, see {@link #full}): {@code present} false only
   * asks that the components it has are numbers.
   */
  abstract boolean usable(Source s, boolean present);

  /** {@code text} is absent, or a number. */
  static boolean absentOrNumber(String text) {
    return text == null || Numbers.positionNumber(text) != null;
  }

  /** The rule a dialect names ({@code position_rule} in cdclake.dialects), or null for none. */
  static Position of(String rule) {
    if (rule == null) {
      return null;
    }
    switch (rule) {
      case "postgresql":
        return new Postgres();
      case "binlog":
        return new Binlog();
      case "mongodb":
        return new Pair(Source.TS_MS, Source.ORD, false);
      case "informix":
        return new Pair(Source.COMMIT_LSN, Source.CHANGE_LSN, true);
      default:
        throw new IllegalArgumentException("decode plan: no position rule '" + rule + "'");
    }
  }

  /**
   * {@code source.sequence} is {@code ["<last commit lsn>","<lsn>"]}: (commit LSN, LSN); a missing commit LSN
   * falls back to the LSN, a missing sequence to {@code source.lsn}, so the LSN never stands alone first.
   */
  static final class Postgres extends Position {
    @Override
    Decimal[] parts(Source s) {
      String seq = s.get(Source.SEQUENCE);
      String first = null;
      String second = null;
      if (seq != null) {
        StringBuilder b = new StringBuilder(seq.length());
        for (int i = 0; i < seq.length(); i++) {
          char c = seq.charAt(i);
          if (c != '[' && c != ']' && c != '"' && c != ' ') {
            b.append(c);
          }
        }
        String[] items = b.toString().split(",", -1);
        first = items[0];
        second = items.length > 1 ? items[1] : null;
      }
      Decimal lsn = Numbers.positionNumber(s.get(Source.LSN));
      Decimal seqLsn = coalesce(Numbers.positionNumber(second), lsn);
      Decimal commit = coalesce(Numbers.positionNumber(first), seqLsn);
      return new Decimal[] {commit, seqLsn};
    }

    /** {@code lsn} is a number, and {@code sequence}, when present, is a pair of numbers or nulls. */
    @Override
    boolean usable(Source s, boolean present) {
      if (present ? Numbers.positionNumber(s.get(Source.LSN)) == null : !absentOrNumber(s.get(Source.LSN))) {
        return false;
      }
      String seq = s.get(Source.SEQUENCE);
      if (seq == null) {
        return true;
      }
      String t = seq.strip();
      if (!t.startsWith("[") || !t.endsWith("]")) {
        return false;
      }
      String[] items = t.substring(1, t.length() - 1).split(",", -1);
      if (items.length != 2) {
        return false;
      }
      for (String item : items) {
        String v = item.strip();
        if (v.length() >= 2 && v.startsWith("\"") && v.endsWith("\"")) {
          v = v.substring(1, v.length() - 1);
        }
        if (!v.equals("null") && Numbers.positionNumber(v) == null) {
          return false;
        }
      }
      return true;
    }
  }

  /** Binlog file number (the file name's numeric suffix), position, row. GTIDs are not used. */
  static final class Binlog extends Position {
    @Override
    Decimal[] parts(Source s) {
      String file = s.get(Source.FILE);
      Decimal number = null;
      if (file != null) {
        int i = file.length();
        while (i > 0 && file.charAt(i - 1) >= '0' && file.charAt(i - 1) <= '9') {
          i--;
        }
        number = Numbers.positionNumber(file.substring(i));
      }
      return new Decimal[] {
        number, Numbers.positionNumber(s.get(Source.POS)), Numbers.positionNumber(s.get(Source.ROW))
      };
    }

    /** The file name ends in a number and {@code pos} is a number ({@code row}, when present, too). */
    @Override
    boolean usable(Source s, boolean present) {
      Decimal[] p = parts(s);
      if (!present) {
        return (s.get(Source.FILE) == null || p[0] != null) && absentOrNumber(s.get(Source.POS))
            && absentOrNumber(s.get(Source.ROW));
      }
      return p[0] != null && p[1] != null && absentOrNumber(s.get(Source.ROW));
    }
  }

  /**
   * Two source fields as numbers (MongoDB: ts_ms, ord; Informix: commit_lsn, change_lsn, which a snapshot read
   * does not have).
   */
  static final class Pair extends Position {
    private final int major;
    private final int minor;
    private final boolean minorOptional;

    Pair(int major, int minor, boolean minorOptional) {
      this.major = major;
      this.minor = minor;
      this.minorOptional = minorOptional;
    }

    @Override
    Decimal[] parts(Source s) {
      return new Decimal[] {Numbers.positionNumber(s.get(major)), Numbers.positionNumber(s.get(minor))};
    }

    /** Both fields are numbers (the minor one may be absent when optional). */
    @Override
    boolean usable(Source s, boolean present) {
      if (!present) {
        return absentOrNumber(s.get(major)) && absentOrNumber(s.get(minor));
      }
      return Numbers.positionNumber(s.get(major)) != null && (minorOptional ? absentOrNumber(s.get(minor))
          : Numbers.positionNumber(s.get(minor)) != null);
    }
  }

  static Decimal coalesce(Decimal a, Decimal b) {
    return a != null ? a : b;
  }

  /** The whole position: connector components, stream rank (0 for incremental-snapshot reads), partition, offset. */
  static Object[] full(Position rule, Source s, String snapshot, int partition, long offset) {
    Decimal[] parts = rule.parts(s);
    Object[] out = new Object[parts.length + 3];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Numbers.orZero(parts[i]);
    }
    out[parts.length] = Decimal.apply("incremental".equals(snapshot) ? 0L : 1L);
    out[parts.length + 1] = Decimal.apply((long) partition);
    out[parts.length + 2] = Decimal.apply(offset);
    return out;
  }
}
