package dev.cdclake.decode;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;

/** ISO-8601 zoned timestamps (Debezium's {@code ZonedTimestamp}) to instants a Spark timestamp can hold. */
final class Times {
  private Times() {}

  /** Seconds since the epoch beyond which microseconds overflow a long (Spark's timestamp range). */
  private static final long MAX_SECONDS = Long.MAX_VALUE / 1_000_000L - 1;

  /**
   * The instant of {@code yyyy-MM-ddTHH:mm[:ss[.fraction]]} followed by {@code Z} or an offset
   * ({@code +hh:mm}, {@code +hhmm}, {@code +hh}, {@code +hh:mm:ss}); other ISO-8601 forms (a zone id in
   * brackets, a space for the {@code T}) through {@link DateTimeFormatter#ISO_DATE_TIME}. Digits beyond the
   * microsecond are kept here and truncated by Spark. Null for text that is not such a timestamp, or outside
   * Spark's timestamp range.
   */
  static Instant instant(String text) {
    if (text == null) {
      return null;
    }
    Instant fast = parseFast(text);
    if (fast != null) {
      return inRange(fast);
    }
    try {
      String iso = text.strip().replace(' ', 'T');
      return inRange(ZonedDateTime.parse(iso, DateTimeFormatter.ISO_DATE_TIME).toInstant());
    } catch (DateTimeException e) {
      return null;
    }
  }

  /** Microseconds since the epoch as an instant (null stays null). */
  static Instant instant(Long micros) {
    return micros == null
        ? null
        : Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
  }

  /** The instant of a text of epoch milliseconds ({@link Numbers#parseLong}), null when not one or out of range. */
  static Instant millis(String text) {
    Long ms = Numbers.parseLong(text);
    return ms == null || ms > Long.MAX_VALUE / 1000 || ms < Long.MIN_VALUE / 1000 ? null : instant(ms * 1000);
  }

  private static Instant inRange(Instant i) {
    long s = i.getEpochSecond();
    return s > MAX_SECONDS || s < -MAX_SECONDS ? null : i;
  }

  private static int digits(String s, int from, int count) {
    if (from + count > s.length()) {
      return -1;
    }
    int v = 0;
    for (int i = from; i < from + count; i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      v = v * 10 + (c - '0');
    }
    return v;
  }

  /** The common shape, parsed by hand (DateTimeFormatter costs microseconds per value); null if not that shape. */
  static Instant parseFast(String s) {
    int n = s.length();
    int i = 0;
    boolean negativeYear = false;
    if (n > 0 && (s.charAt(0) == '+' || s.charAt(0) == '-')) {
      negativeYear = s.charAt(0) == '-';
      i = 1;
    }
    int yearStart = i;
    while (i < n && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
      i++;
    }
    int yearDigits = i - yearStart;
    if (yearDigits < 4 || yearDigits > 9 || i >= n || s.charAt(i) != '-') {
      return null;
    }
    long year = Long.parseLong(s, yearStart, i, 10);
    if (negativeYear) {
      year = -year;
    }
    int month = digits(s, i + 1, 2);
    if (month < 0 || i + 3 >= n || s.charAt(i + 3) != '-') {
      return null;
    }
    int day = digits(s, i + 4, 2);
    i += 6;
    if (day < 0 || i >= n || s.charAt(i) != 'T') {
      return null;
    }
    int hour = digits(s, i + 1, 2);
    if (hour < 0 || i + 3 >= n || s.charAt(i + 3) != ':') {
      return null;
    }
    int minute = digits(s, i + 4, 2);
    i += 6;
    if (minute < 0) {
      return null;
    }
    int second = 0;
    int nanos = 0;
    if (i < n && s.charAt(i) == ':') {
      second = digits(s, i + 1, 2);
      i += 3;
      if (second < 0) {
        return null;
      }
      if (i < n && s.charAt(i) == '.') {
        int start = ++i;
        while (i < n && s.charAt(i) >= '0' && s.charAt(i) <= '9') {
          i++;
        }
        int count = i - start;
        if (count == 0 || count > 9) {
          return null;
        }
        nanos = digits(s, start, count);
        for (int k = count; k < 9; k++) {
          nanos *= 10;
        }
      }
    }
    if (i >= n) {
      return null;
    }
    int offsetSeconds;
    char z = s.charAt(i);
    if (z == 'Z' && i + 1 == n) {
      offsetSeconds = 0;
    } else if (z == '+' || z == '-') {
      int rest = n - i - 1;
      int oh = digits(s, i + 1, 2);
      int om = 0;
      int os = 0;
      if (rest == 2) {
        // +hh
      } else if (rest == 4) {
        om = digits(s, i + 3, 2);
      } else if (rest == 5 && s.charAt(i + 3) == ':') {
        om = digits(s, i + 4, 2);
      } else if (rest == 8 && s.charAt(i + 3) == ':' && s.charAt(i + 6) == ':') {
        om = digits(s, i + 4, 2);
        os = digits(s, i + 7, 2);
      } else {
        return null;
      }
      if (oh < 0 || om < 0 || os < 0 || oh > 18 || om > 59 || os > 59) {
        return null;
      }
      offsetSeconds = (oh * 3600 + om * 60 + os) * (z == '-' ? -1 : 1);
    } else {
      return null;
    }
    if (hour > 23 || minute > 59 || second > 59 || year > 999_999_999L || year < -999_999_999L) {
      return null;
    }
    long epochDay;
    try {
      epochDay = LocalDate.of((int) year, month, day).toEpochDay();
    } catch (DateTimeException e) {
      return null;
    }
    long seconds = epochDay * 86_400L + hour * 3600L + minute * 60L + second - offsetSeconds;
    return Instant.ofEpochSecond(seconds, nanos);
  }
}
