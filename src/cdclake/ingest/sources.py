"""Where a batch's Kafka records come from: the broker (Spark Kafka source) or recorded JSON Lines (replay).

Both give the same records DataFrame (:data:`cdclake.decode.records.STRING_RECORD_SCHEMA` or Spark's
Kafka schema), so everything after reading is identical for ingestion and replay.
"""

from __future__ import annotations

import abc
import atexit
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from cdclake.exceptions import ConfigError, RecordSourceError
from cdclake.ingest.offsets import OffsetRange, OffsetsAt, TopicPartition, within
from cdclake.spark import temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdclake.decode.records import RecordCoordinates, RecordSampler, SampleRecord

logger = logging.getLogger(__name__)

#: Records :class:`KafkaSampler` spreads over each partition's range besides its first and last.
SAMPLES_BETWEEN = 2

#: Spark setting listing the data sources read through their V1 relation (Kafka is among them by default).
V1_SOURCES_CONF = "spark.sql.sources.useV1SourceList"


class RecordSource(abc.ABC):
    """A bounded, re-readable source of Kafka records."""

    #: Whether the job caches the records it reads for the batch's several passes over them (discovery,
    #: decoding, transactions, schema changes). False where reading them again is cheaper than caching.
    cache_records: bool = True
    #: Whether :meth:`watermarks` are the log's own start and end (Kafka), so that an offset the source continues
    #: from outside them means records were deleted or the log re-created (:func:`cdclake.ingest.offsets.find_gaps`).
    #: False for records in files or frames, whose first and last offsets are only those of the records held.
    log_bounds: bool = False

    @abc.abstractmethod
    def watermarks(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """(earliest, latest) offset per topic-partition."""

    @abc.abstractmethod
    def read(self, spark: SparkSession, ranges: Sequence[OffsetRange], headers: bool = True) -> DataFrame:
        """Exactly the records of ``ranges``; without ``headers``, their headers may be left out (null) where
        reading them costs (Kafka)."""

    def sampler(self, spark: SparkSession, ranges: Sequence[OffsetRange]) -> RecordSampler | None:
        """A sampler of ``ranges`` for the decoder's discovery that reads the source itself, where that is
        cheaper than a pass; None otherwise (the job then samples its cached records, :class:`FrameSampler`)."""
        return None

    @contextmanager
    def offsets_by_time(self, partitions: Sequence[TopicPartition]) -> Iterator[OffsetsAt | None]:
        """While open, the log's offsets by timestamp of ``partitions`` (:data:`~cdclake.ingest.offsets.OffsetsAt`),
        for a capped batch's cut (:func:`~cdclake.ingest.offsets.cap_at_time`); None where the source cannot look
        them up (records in files or frames)."""
        yield None

    def last_timestamp(self, spark: SparkSession, ranges: Sequence[OffsetRange]) -> datetime | None:
        """The earliest of the Kafka timestamps of the last records of ``ranges`` (aware UTC; None when none
        has one)."""
        from pyspark.sql import functions as F

        last = [OffsetRange(r.topic, r.partition, r.end - 1, r.end) for r in ranges if r.end > r.start]
        if not last:
            return None
        found = self.read(spark, last, headers=False).agg(F.min("timestamp").alias("ts")).collect()[0]["ts"]
        return None if found is None else found.astimezone()


def source_topic_patterns(topic_prefix: str) -> list[str]:
    """Topics a batch reads for a connector: data topics, ``<prefix>.transaction`` and the schema change
    topic ``<prefix>`` (not heartbeats, notifications, schema history or the Kafka signal topic)."""
    p = re.escape(topic_prefix)
    return [
        rf"{p}",
        rf"{p}\.transaction",
        rf"{p}\.(?!notifications$|schema-history$|transaction$)[^.]+(\.[^.]+){{1,2}}",
    ]


class KafkaRecordSource(RecordSource):
    """Records from the broker, read with Spark's Kafka source over explicit offset ranges.

    The records are not cached by the job (:attr:`cache_records`): on 2 cores, filling a cache with a backlog
    of schema-carrying envelopes (a few GB) costs more than reading the compressed batches from the broker
    again for each pass (docs/benchmarks.md). Each topic is a separate read whose ``topic`` column is a
    constant, so a pass over one topic (transactions, schema changes, a quarantined table's records) reads
    that topic only: the optimizer folds ``topic = '<other>'`` to false and drops the other reads.
    """

    cache_records = False
    log_bounds = True

    def __init__(self, bootstrap: str, patterns: Iterable[str], kafka_options: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.patterns = [re.compile(p) for p in patterns]
        self.kafka_options = kafka_options or {}

    def _consumer(self, fetch: bool = False):  # type: ignore[no-untyped-def]
        """A plain Kafka consumer of the driver (confluent-kafka): no group offsets, no auto-commit. ``fetch``: one
        that reads records (:meth:`fetch`): the end of a partition is an event, and a fetch that finds fewer
        records than it asks for returns at once instead of waiting for more (librdkafka's default waits
        ``fetch.wait.max.ms``, 500 ms, which a read of a few records would pay at every seek)."""
        from confluent_kafka import Consumer

        config: dict[str, object] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": "cdclake-planner",
            "enable.auto.commit": False,
            # what Spark's Kafka source reads too
            "isolation.level": "read_uncommitted",
            "log_level": 0,
        }
        if fetch:
            config |= {"enable.partition.eof": True, "fetch.wait.max.ms": 5}
        return Consumer(config)

    def watermarks(self, timeout_s: float = 15.0) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        from confluent_kafka import TopicPartition as CTP

        consumer = self._consumer()
        try:
            try:
                metadata = consumer.list_topics(timeout=timeout_s)
            except Exception as exc:  # noqa: BLE001 - KafkaException
                raise RecordSourceError(f"cannot list topics on Kafka {self.bootstrap}: {exc}") from exc
            earliest: dict[TopicPartition, int] = {}
            latest: dict[TopicPartition, int] = {}
            for topic, meta in metadata.topics.items():
                if not any(p.fullmatch(topic) for p in self.patterns):
                    continue
                for partition in meta.partitions:
                    low, high = consumer.get_watermark_offsets(CTP(topic, partition), timeout=timeout_s)
                    earliest[(topic, partition)] = low
                    latest[(topic, partition)] = high
            return earliest, latest
        finally:
            consumer.close()

    def read(self, spark: SparkSession, ranges: Sequence[OffsetRange], headers: bool = True) -> DataFrame:
        """The records of ``ranges``, one read per topic; without ``headers``, Spark's Kafka source leaves them out
        (no ``headers`` column): turning every record's headers into Spark rows (Debezium's context headers on each
        record) was about a seventh of the decoding pass's CPU (docs/benchmarks.md)."""
        from functools import reduce

        from pyspark.sql import functions as F

        by_topic: dict[str, list[OffsetRange]] = {}
        for r in ranges:
            by_topic.setdefault(r.topic, []).append(r)
        if not by_topic:
            raise RecordSourceError("KafkaRecordSource.read needs at least one offset range")
        frames = [
            self._read_topic(spark, topic, topic_ranges, headers).withColumn("topic", F.lit(topic))
            for topic, topic_ranges in sorted(by_topic.items())
        ]
        return reduce(lambda a, b: a.unionByName(b), frames)

    def sampler(self, spark: SparkSession, ranges: Sequence[OffsetRange]) -> RecordSampler:
        return KafkaSampler(self, spark, ranges)

    @contextmanager
    def offsets_by_time(
        self, partitions: Sequence[TopicPartition], timeout_s: float = 15.0
    ) -> Iterator[OffsetsAt | None]:
        """One consumer's ``offsets_for_times`` lookups (see :meth:`RecordSource.offsets_by_time`).

        Raises:
            RecordSourceError: a lookup fails (the message names the partitions and the timestamp).
        """
        from confluent_kafka import TopicPartition as CTP

        consumer = None  # opened by the first lookup: a batch the cap does not cut makes none

        def offsets_at(at_ms: int) -> dict[TopicPartition, int | None]:
            nonlocal consumer
            if consumer is None:
                consumer = self._consumer()
            try:
                found = consumer.offsets_for_times([CTP(t, p, at_ms) for t, p in partitions], timeout=timeout_s)
            except Exception as exc:  # noqa: BLE001 - KafkaException
                raise RecordSourceError(
                    f"cannot look up the offsets at timestamp {at_ms} of {sorted(partitions)} on Kafka "
                    f"{self.bootstrap}: {exc}"
                ) from exc
            for f in found:
                if f.error is not None:
                    raise RecordSourceError(
                        f"cannot look up the offset at timestamp {at_ms} of {f.topic}/{f.partition} on Kafka "
                        f"{self.bootstrap}: {f.error}"
                    )
            return {(f.topic, f.partition): (f.offset if f.offset >= 0 else None) for f in found}

        try:
            yield offsets_at
        finally:
            if consumer is not None:
                consumer.close()

    def last_timestamp(self, spark: SparkSession, ranges: Sequence[OffsetRange]) -> datetime | None:
        """Read by the driver (:meth:`fetch`), without a Spark job."""
        points = [(r.topic, r.partition, r.end - 1) for r in ranges if r.end > r.start]
        stamps = [row[5] for row in self.fetch(points) if row[5] is not None]
        return min(stamps, default=None)  # type: ignore[type-var]

    def fetch(self, points: Sequence[tuple[str, int, int]], timeout_s: float = 10.0) -> list[tuple[object, ...]]:
        """The records at these ``(topic, partition, offset)`` points, read by the driver itself: one row per distinct
        point, in the order the points are first given.

        Rows of :data:`cdclake.decode.records.KAFKA_RECORD_SCHEMA`. An offset that holds no record (compacted
        away, or a transaction marker) gives no row, as a filter over the records would. The points of a
        partition are read in windows (:func:`fetch_windows`): one seek per window, then the records in order,
        so a small batch whose every record is a point costs one read per partition, not one per record.

        Raises:
            RecordSourceError: the broker cannot be read (the message names the point).
        """
        from confluent_kafka import TopicPartition as CTP

        wanted: dict[tuple[str, int], list[int]] = {}
        for topic, partition, offset in points:
            wanted.setdefault((topic, partition), []).append(offset)
        windows = {tp: fetch_windows(offsets) for tp, offsets in wanted.items()}
        rows: dict[tuple[str, int, int], tuple[object, ...]] = {}
        for round_ in range(max((len(w) for w in windows.values()), default=0)):
            # every partition's next window in one assignment, read by a consumer of its own: a consumer reads
            # its assigned partitions together, and re-assigning a live consumer costs about a second
            todo = {tp: w[round_] for tp, w in windows.items() if len(w) > round_}
            consumer = self._consumer(fetch=True)
            try:
                consumer.assign([CTP(topic, partition, window[0]) for (topic, partition), window in todo.items()])
                self._read_windows(consumer, todo, rows, timeout_s)
            finally:
                consumer.close()
        return [rows[p] for p in dict.fromkeys(points) if p in rows]

    def _read_windows(
        self,
        consumer: Any,
        todo: dict[tuple[str, int], list[int]],
        rows: dict[tuple[str, int, int], tuple[object, ...]],
        timeout_s: float,
    ) -> None:
        """Read the windows ``todo`` (sorted offsets per partition, each partition assigned at its first) into
        ``rows``, until each window's last point is passed, its partition's end is reached, or ``timeout_s``."""
        from confluent_kafka import KafkaError

        at = dict.fromkeys(todo, 0)  # todo[tp][at[tp]] is the partition's next point to find
        deadline = time.monotonic() + timeout_s
        while any(at[tp] < len(todo[tp]) for tp in todo):
            left = deadline - time.monotonic()
            if left <= 0:
                # nothing at or after the offset (a marker at the log's end): no sample there
                for (topic, partition), window in todo.items():
                    if at[(topic, partition)] < len(window):
                        logger.warning(
                            "no Kafka record at %s/%s@%s within %ss",
                            topic,
                            partition,
                            window[at[(topic, partition)]],
                            timeout_s,
                        )
                return
            # short waits: a consume that asks for more records than come waits its whole timeout
            for message in consumer.consume(num_messages=500, timeout=min(left, 0.05)):
                tp = (message.topic(), message.partition())
                window = todo.get(tp)
                if window is None or at[tp] >= len(window):
                    continue
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at[tp] = len(window)  # the log ends before the window's remaining points: no records there
                    continue
                if error is not None:
                    raise RecordSourceError(
                        f"cannot read {tp[0]}/{tp[1]}@{window[at[tp]]} from Kafka {self.bootstrap}: {error}"
                    )
                offset = message.offset()
                while at[tp] < len(window) and window[at[tp]] < offset:
                    at[tp] += 1  # a point passed without a record (compacted away, a marker) has none
                if at[tp] < len(window) and window[at[tp]] == offset:
                    rows[(tp[0], tp[1], offset)] = _fetched_row(message, tp[0], tp[1], offset)
                    at[tp] += 1

    def _read_topic(self, spark: SparkSession, topic: str, ranges: Sequence[OffsetRange], headers: bool) -> DataFrame:
        start = {topic: {str(r.partition): r.start for r in ranges}}
        end = {topic: {str(r.partition): r.end for r in ranges}}
        reader = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("assign", json.dumps({topic: sorted(r.partition for r in ranges)}))
            .option("startingOffsets", json.dumps(start))
            .option("endingOffsets", json.dumps(end))
            .option("includeHeaders", str(headers).lower())
            .option("failOnDataLoss", "true")
            # Kafka partitions are split into offset slices so that a single-partition topic (Debezium's
            # default) is read and decoded on every core, not one (a small range is not split, see read_slices)
            .option(
                "minPartitions", str(read_slices(sum(r.count for r in ranges), spark.sparkContext.defaultParallelism))
            )
            # bigger fetches than the consumer's 1 MiB per partition: a backlog of schema-carrying envelopes
            # (kilobytes each) is read in far fewer round trips (1.7x faster, docs/benchmarks.md)
            .option("kafka.max.partition.fetch.bytes", str(8 * 2**20))
            .option("kafka.fetch.max.bytes", str(64 * 2**20))
            # a read that reaches the end of the log returns at once: the consumer's default lets the broker hold
            # such a fetch 500 ms waiting for records the range does not need, once per task
            .option("kafka.fetch.max.wait.ms", "10")
        )
        for key, value in self.kafka_options.items():
            reader = reader.option(key, value)
        # Spark's DataSource V2 Kafka reader: the V1 relation (Spark's default for batch reads) turns every
        # record into an external Row and back, which cost about 12% of a plain read (docs/benchmarks.md)
        v1 = spark.conf.get(V1_SOURCES_CONF, None) or ""
        with temporary_conf(spark, {V1_SOURCES_CONF: ",".join(s for s in v1.split(",") if s.strip() != "kafka")}):
            return reader.load()


#: Fewest records per offset slice of a topic's read (:func:`read_slices`).
SLICE_MIN_RECORDS = 2_500
#: Most records per offset slice of a topic's read (:func:`read_slices`): a task holds its slice's decoded rows
#: (a cached block, then its part of the transactions phase's Arrow rows), so the cap bounds a task's memory
#: whatever the batch's size (a 3M-event real-shape batch runs in a 900m heap, docs/benchmarks.md).
SLICE_MAX_RECORDS = 250_000


def read_slices(records: int, parallelism: int) -> int:
    """How many offset slices a topic's read of ``records`` records is cut into (Spark's ``minPartitions``; a
    topic with more partitions is still read in one task per partition at least): up to two per core, each of
    at least :data:`SLICE_MIN_RECORDS` records, and as many more as keep each to :data:`SLICE_MAX_RECORDS` (pure).

    A slice is a fetch of its own from the broker in every pass over the records (they are not cached), which
    costs more than decoding a few records: a small batch's topic is read in one.
    """
    return max(1, min(2 * parallelism, records // SLICE_MIN_RECORDS), -(-records // SLICE_MAX_RECORDS))


class KafkaSampler:
    """Single-record Kafka reads within a batch's ranges (:class:`cdclake.decode.RecordSampler`).

    The driver reads the few records itself (:meth:`KafkaRecordSource.fetch`) and hands them to Spark as a
    local relation: no Spark job, no executor-side Kafka consumer (whose start costs more than the read of
    a few records).
    """

    def __init__(self, source: KafkaRecordSource, spark: SparkSession, ranges: Sequence[OffsetRange]) -> None:
        self.source, self.spark, self.ranges = source, spark, [r for r in ranges if r.count > 0]

    def spread(self) -> DataFrame:
        return self.at(spread_points(self.ranges))

    def spread_rows(self) -> list[SampleRecord]:
        from cdclake.decode.records import SampleRecord

        def text(raw: object) -> str | None:
            return None if raw is None else bytes(raw).decode("utf-8", errors="replace")  # type: ignore[arg-type]

        fetched = self.source.fetch(self._inside(spread_points(self.ranges)))
        return [
            SampleRecord(topic, partition, offset, stamp, text(key), text(value))  # type: ignore[arg-type]
            for key, value, topic, partition, offset, stamp, _ in fetched
        ]

    def _inside(self, points: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        inside = sorted({point for point in points if any(r.holds(*point) for r in self.ranges)})
        if len(inside) != len(set(points)):
            raise RecordSourceError(f"sample points outside the batch's ranges: {sorted(set(points) - set(inside))}")
        return inside

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        from cdclake.decode.records import KAFKA_RECORD_SCHEMA

        inside = self._inside(points)
        return self.spark.createDataFrame(self.source.fetch(inside) if inside else [], KAFKA_RECORD_SCHEMA)


class FrameSampler:
    """Samples records already in a DataFrame (the job's cached replay records) at the Kafka sampler's points.

    One filter over the frame gives every sample (:class:`cdclake.decode.RecordSampler`); discovery by
    passes makes three. Records missing at a point (a gap in the offsets) are simply not in the sample.
    """

    def __init__(self, frame: DataFrame, ranges: Sequence[OffsetRange]) -> None:
        self.frame, self.ranges = frame, [r for r in ranges if r.count > 0]

    def spread(self) -> DataFrame:
        return self.at(spread_points(self.ranges))

    def spread_rows(self) -> list[SampleRecord]:
        from cdclake.decode.records import sample_records

        return sample_records(self.spread())

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        from pyspark.sql import functions as F

        if not points:
            return self.frame.limit(0)
        point = F.struct(F.col("topic"), F.col("partition").cast("int"), F.col("offset").cast("long"))
        wanted = [F.struct(F.lit(t), F.lit(p), F.lit(o).cast("long")) for t, p, o in sorted(set(points))]
        return self.frame.where(point.isin(*wanted))


#: Points of a partition closer than this many offsets are read in one window (records in between are read and
#: dropped): reading a few hundred records costs less than a seek.
FETCH_WINDOW_GAP = 256


def fetch_windows(offsets: Iterable[int], gap: int | None = None) -> list[list[int]]:
    """The sorted distinct ``offsets`` of one partition in windows read one seek each: a new window starts where
    the next offset is more than ``gap`` (default :data:`FETCH_WINDOW_GAP`) past the previous one (pure)."""
    gap = FETCH_WINDOW_GAP if gap is None else gap
    windows: list[list[int]] = []
    for offset in sorted(set(offsets)):
        if windows and offset - windows[-1][-1] <= gap:
            windows[-1].append(offset)
        else:
            windows.append([offset])
    return windows


def _fetched_row(message: Any, topic: str, partition: int, offset: int) -> tuple[object, ...]:
    """A confluent-kafka message as a row of :data:`cdclake.decode.records.KAFKA_RECORD_SCHEMA`."""
    from datetime import UTC, datetime

    _, millis = message.timestamp()
    stamp = datetime.fromtimestamp(millis / 1000, tz=UTC) if millis is not None and millis >= 0 else None
    headers = message.headers()
    return (
        message.key(),
        message.value(),
        topic,
        partition,
        offset,
        stamp,
        None if headers is None else [(k, v) for k, v in headers],
    )


def spread_points(ranges: Sequence[OffsetRange]) -> list[tuple[str, int, int]]:
    """Each range's first and last offset and :data:`SAMPLES_BETWEEN` evenly spaced in between."""
    points: set[tuple[str, int, int]] = set()
    for r in ranges:
        if r.count > 0:
            step = max(1, r.count // (SAMPLES_BETWEEN + 1))
            points |= {(r.topic, r.partition, o) for o in (*range(r.start, r.end, step), r.end - 1)}
    return sorted(points)


_REPLAY_SCHEMA = (
    "topic STRING, partition INT, offset BIGINT, timestamp BIGINT, key STRING, value STRING, "
    "headers ARRAY<STRUCT<key: STRING, value: STRING>>"
)


class FrameRecordSource(RecordSource):
    """Records already in a DataFrame (tests, and the base of replay)."""

    def __init__(self, frame: DataFrame, topic_patterns: Iterable[str] | None = None) -> None:
        self._frame = frame
        self.patterns = [re.compile(p) for p in topic_patterns] if topic_patterns else None

    def watermarks(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        from pyspark.sql import functions as F

        rows = (
            self._frame.groupBy("topic", "partition")
            .agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
            .collect()
        )
        earliest, latest = {}, {}
        for row in rows:
            if self.patterns is not None and not any(p.fullmatch(row["topic"]) for p in self.patterns):
                continue
            earliest[(row["topic"], row["partition"])] = int(row["lo"])
            latest[(row["topic"], row["partition"])] = int(row["hi"]) + 1
        return earliest, latest

    def read(self, spark: SparkSession, ranges: Sequence[OffsetRange], headers: bool = True) -> DataFrame:
        return self._frame.where(within(ranges)) if ranges else self._frame.limit(0)

    def infer(self) -> dict[str, object]:
        """Infer topic prefix, connector and converter settings from the records (driver-side sample)."""
        from pyspark.sql import functions as F

        sample = (
            self._frame.where(F.col("value").isNotNull() & ~F.col("topic").endswith(".transaction"))
            .select("topic", "value")
            .limit(200)
            .collect()
        )
        prefix = None
        value_schemas = None
        connector = None
        for row in sample:
            try:
                doc = json.loads(row["value"])
            except ValueError:
                continue
            schemas = isinstance(doc, dict) and set(doc) == {"schema", "payload"}
            payload = doc.get("payload") if schemas else doc
            if not isinstance(payload, dict):
                continue
            source = payload.get("source")
            if isinstance(source, dict) and source.get("name"):
                prefix = prefix or source["name"]
                connector = connector or source.get("connector")
                if value_schemas is None and "op" in payload:
                    value_schemas = schemas
        return {"topic_prefix": prefix, "connector": connector, "value_schemas": value_schemas}


class ReplayRecordSource(FrameRecordSource):
    """Records from JSON Lines record files: ``cdclake capture`` output, the same with headers as an object, or
    kcat ``-J`` output (:func:`cdclake.decode.records.parse_record_line`), mixed freely.

    Every line is checked before Spark reads anything (:func:`prepare_replay_files`); Spark reads the files
    whose lines are all in the capture format as they are, and a capture-format copy of the others.

    Raises:
        ConfigError: a path does not exist, or there is no ``.jsonl`` file.
        ReplayFileError: a line is not a record (the message names the file and the line).
    """

    def __init__(
        self, spark: SparkSession, paths: Sequence[str | Path], topic_patterns: Iterable[str] | None = None
    ) -> None:
        self.files = replay_file_paths(paths)
        super().__init__(self._load(spark), topic_patterns)

    def _load(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        files = prepare_replay_files(self.files)
        raw = spark.read.schema(_REPLAY_SCHEMA).option("mode", "FAILFAST").json(files)
        frame = raw.select(
            "topic",
            "partition",
            "offset",
            F.timestamp_millis("timestamp").alias("timestamp"),
            "key",
            "value",
            F.transform(
                "headers", lambda h: F.struct(h["key"].alias("key"), h["value"].cast("binary").alias("value"))
            ).alias("headers"),
        )
        # the same record can sit in several overlapping dumps: keep one copy per coordinate
        return frame.dropDuplicates(["topic", "partition", "offset"])


def replay_file_paths(paths: Sequence[str | Path]) -> list[str]:
    """The record files of ``paths``: files as given, folders expanded to their ``*.jsonl`` files (sorted).

    Raises:
        ConfigError: a path does not exist, or there is no file at all.
    """
    files: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            files += [str(p) for p in sorted(path.glob("*.jsonl"))]
        elif path.exists():
            files.append(str(path))
        else:
            raise ConfigError(f"replay file {path} does not exist")
    if not files:
        raise ConfigError(f"no .jsonl files in {', '.join(map(str, paths))}")
    return files


#: Files checked by :func:`prepare_replay_files` in this process, by (path, size, mtime) of each: the paths
#: Spark reads for them. A replay builds its source twice (inference, then the batches); the pass runs once.
_PREPARED: dict[tuple[tuple[str, int, int], ...], list[str]] = {}
_COPIES: list[Path] = []


def _copies_dir() -> Path:
    """The process's directory of capture-format copies, removed when the process exits."""
    if not _COPIES:
        _COPIES.append(Path(tempfile.mkdtemp(prefix="cdclake-replay-")))
        atexit.register(shutil.rmtree, _COPIES[0], True)
    return _COPIES[0]


def prepare_replay_files(paths: Sequence[str | Path]) -> list[str]:
    """Check every line of the record files in one streaming pass; the files Spark reads for them.

    A file whose lines are all in the capture format as Spark's reader takes it is read as it is; any other
    gets a capture-format copy in a temporary directory of the process (its lines in that format copied as
    they are, the others rewritten), made in the same pass. A record repeated across the files (overlapping
    dumps) must be the same record each time. The result is kept for the process while the files keep their
    size and modification time, so building a second source over them costs nothing.

    Raises:
        ConfigError: a path does not exist, or there is no file at all.
        ReplayFileError: a line is not a record, or differs from an earlier one at its coordinates (the
            message names the file and the line); no copy is left behind.
        RecordSourceError: a file cannot be read.
    """
    from cdclake.decode.records import RecordCoordinates

    files = [Path(p) for p in replay_file_paths(paths)]
    key = tuple((str(f.resolve()), (st := f.stat()).st_size, st.st_mtime_ns) for f in files)
    if key in _PREPARED:
        return list(_PREPARED[key])
    began = time.monotonic()
    seen = RecordCoordinates()
    made: list[Path] = []
    try:
        out = [_prepare_file(f, seen, made) for f in files]
    except BaseException:
        for copy in made:
            copy.unlink(missing_ok=True)
        raise
    logger.info(
        "replay: checked %d file(s) in %.1fs; %d read through a capture-format copy",
        len(files),
        time.monotonic() - began,
        len(made),
    )
    _PREPARED[key] = out
    return list(out)


def _prepare_file(path: Path, seen: RecordCoordinates, made: list[Path]) -> str:
    """Check one file; the path Spark reads for it (itself, or a copy added to ``made``)."""
    from cdclake.decode.records import read_record_file

    copy: BinaryIO | None = None
    try:
        for line in read_record_file(path, seen):
            if copy is None and not line.native:
                target = Path(tempfile.mkstemp(suffix=".jsonl", prefix=path.stem + "-", dir=_copies_dir())[1])
                made.append(target)
                copy = target.open("wb")
                with path.open("rb") as original:  # the lines before this one are in the capture format
                    _copy_bytes(original, copy, line.start)
            if copy is not None:
                copy.write(line.raw if line.native else line.record.capture_json().encode() + b"\n")
    finally:
        if copy is not None:
            copy.close()
    return str(path) if copy is None else copy.name


def _copy_bytes(src: BinaryIO, dst: BinaryIO, count: int) -> None:
    while count > 0:
        chunk = src.read(min(count, 1 << 20))
        if not chunk:
            break
        dst.write(chunk)
        count -= len(chunk)
