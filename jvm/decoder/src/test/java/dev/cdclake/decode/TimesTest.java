package dev.cdclake.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Random;
import org.junit.jupiter.api.Test;

class TimesTest {
  @Test
  void theFastPathAgreesWithTheJdkParser() {
    Random random = new Random(11);
    for (int i = 0; i < 2000; i++) {
      long seconds = random.nextLong(-62_000_000_000L, 253_000_000_000L);
      int nanos = random.nextInt(1_000_000_000);
      int offset = random.nextInt(-18 * 3600 + 1, 18 * 3600) / 60 * 60;
      OffsetDateTime moment = Instant.ofEpochSecond(seconds, nanos).atOffset(ZoneOffset.ofTotalSeconds(offset));
      String text = moment.toString();
      assertEquals(moment.toInstant(), Times.parseFast(text), text);
      assertEquals(moment.toInstant(), Times.instant(text), text);
    }
  }

  @Test
  void debeziumShapes() {
    assertEquals(Instant.parse("2023-11-14T21:13:20.123456Z"), Times.instant("2023-11-14T23:13:20.123456+02:00"));
    assertEquals(Instant.parse("2023-11-14T21:13:20Z"), Times.instant("2023-11-14T21:13:20Z"));
    assertEquals(Instant.parse("2024-01-01T00:30:00Z"), Times.instant("2024-01-01T00:00:00-0030"));
    assertEquals(Instant.parse("2024-01-01T05:00:00Z"), Times.instant("2024-01-01T00:00:00-05"));
    assertEquals(Instant.parse("2024-01-01T00:00:00Z"), Times.instant("2024-01-01 01:00:00+01:00"));
    assertEquals(Instant.parse("2024-06-01T10:00:00Z"), Times.instant("2024-06-01T12:00:00+02:00[Europe/Paris]"));
    assertEquals(Instant.parse("+10000-01-01T00:00:00Z"), Times.instant("+10000-01-01T00:00:00Z"));
  }

  @Test
  void notTimestampsOrOutOfRangeAreNull() {
    for (String bad : new String[] {"infinity", "", "2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "2024-01-01",
        "2024-01-01T25:00:00Z", "2024-01-01T00:00:00", "+999999999-01-01T00:00:00Z"}) {
      assertNull(Times.instant(bad), bad);
    }
  }
}
