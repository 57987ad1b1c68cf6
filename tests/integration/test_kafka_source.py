"""The ingestion job's Kafka source on the local stack's broker: exact ranges, one read per topic."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdclake.decode.records import normalise_records
from cdclake.exceptions import RecordSourceError
from cdclake.ingest.offsets import OffsetRange
from cdclake.ingest.sources import KafkaRecordSource

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]


def _kafka_relations(frame) -> int:  # type: ignore[no-untyped-def]
    """Kafka reads in the optimized plan; they must be Spark's DataSource V2 reader (the V1 relation, Spark's
    default for batch reads, converts every record to an external Row and back)."""
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    assert "KafkaRelation" not in plan
    return plan.count("RelationV2") if "KafkaTable" in plan else 0


def test_ranges_are_read_exactly_and_a_topic_filter_reads_only_that_topic(
    kafka_bootstrap: str, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = uuid.uuid4().hex[:8]
    topics = [f"it-src-{run}.a", f"it-src-{run}.b"]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1) for t in topics]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for topic in topics:
        for i in range(12):
            headers = [("__debezium.context.taskId", b"0"), ("__debezium.oldkey", f'{{"id":{i}}}'.encode())]
            producer.produce(
                topic, key=f"k{i}".encode(), value=f"{topic}:{i}".encode(), partition=i % 2, headers=headers
            )
    assert producer.flush(30) == 0

    source = KafkaRecordSource(kafka_bootstrap, [rf"it-src-{run}\..*"])
    earliest, latest = source.watermarks()
    assert latest == {(t, p): 6 for t in topics for p in (0, 1)}
    ranges = [OffsetRange(topics[0], 0, 1, 4), OffsetRange(topics[0], 1, 0, 6), OffsetRange(topics[1], 1, 5, 6)]
    raw = normalise_records(source.read(spark, ranges))
    got = sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in raw.collect())
    # partition p holds values i with i % 2 == p, in order: offset o of partition p is i = 2 * o + p
    expected = sorted(
        (r.topic, r.partition, o, f"{r.topic}:{2 * o + r.partition}") for r in ranges for o in range(r.start, r.end)
    )
    assert got == expected
    # every record's headers, in order; read without them (what the ingestion job decodes): the same records,
    # their headers null
    for r in raw.collect():
        i = r["value"].rsplit(":", 1)[1]
        headers = [(h["key"], h["value"]) for h in r["headers"]]
        assert headers == [("__debezium.context.taskId", b"0"), ("__debezium.oldkey", f'{{"id":{i}}}'.encode())]
    bare = source.read(spark, ranges, headers=False)
    assert "headers" not in bare.columns
    bare_rows = normalise_records(bare).collect()
    assert sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in bare_rows) == expected
    assert all(r["headers"] is None for r in bare_rows)
    # a few records per topic: each Kafka partition's range is one slice (one fetch per pass over them)
    assert raw.rdd.getNumPartitions() == len(ranges)
    # cut into offset slices when a topic holds enough records: the same records, read by more tasks
    monkeypatch.setattr("cdclake.ingest.sources.SLICE_MIN_RECORDS", 1)
    sliced = normalise_records(source.read(spark, ranges))
    assert sliced.rdd.getNumPartitions() > len(ranges)
    assert sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in sliced.collect()) == expected
    monkeypatch.undo()

    # the job does not cache Kafka records: every pass over one topic must read that topic only
    assert source.cache_records is False
    assert _kafka_relations(raw) == 2
    # the session's own setting is untouched by the read
    assert "kafka" in spark.conf.get("spark.sql.sources.useV1SourceList")
    only_b = raw.where((F.col("topic") == topics[1]) & F.col("value").isNotNull())
    assert _kafka_relations(only_b) == 1
    assert [r["offset"] for r in only_b.collect()] == [5]

    # the decoder's discovery sampler reads single records, never a whole range
    sampler = source.sampler(spark, ranges)
    spread = sorted((r["topic"], r["partition"], r["offset"]) for r in sampler.spread().collect())
    # SAMPLES_BETWEEN = 2: the first record, one every count // 3 records, the last
    first, second, third = (
        [(topics[0], 0, o) for o in (1, 2, 3)],
        [(topics[0], 1, o) for o in (0, 2, 4, 5)],
        [(topics[1], 1, 5)],
    )
    assert spread == first + second + third
    # the same records in the driver, without a Spark job (discovery from the sample uses these)
    rows = sampler.spread_rows()
    assert sorted((r.topic, r.partition, r.offset) for r in rows) == spread
    assert all(r.value == f"{r.topic}:{2 * r.offset + r.partition}" and r.key is not None for r in rows)
    points = [(topics[0], 1, 0), (topics[0], 1, 4), (topics[0], 0, 2), (topics[1], 1, 5)]
    at = sampler.at(points)
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in at.collect()) == sorted(points)
    with pytest.raises(RecordSourceError, match="outside the batch's ranges"):
        sampler.at([(topics[0], 0, 0)])
    assert sampler.at([]).count() == 0
    assert source.sampler(spark, []).spread().count() == 0

    # the driver's reads: each distinct point once, in the order given; a point past the log's end has no row and
    # costs no wait (the partition's end is an event); windows of a partition read with one seek each
    asked = [(topics[1], 0, 5), (topics[0], 1, 1), (topics[0], 1, 1), (topics[0], 1, 9), (topics[0], 1, 3)]
    fetched = source.fetch(asked, timeout_s=30)
    assert [(r[2], r[3], r[4], r[1]) for r in fetched] == [
        (topics[1], 0, 5, f"{topics[1]}:10".encode()),
        (topics[0], 1, 1, f"{topics[0]}:3".encode()),
        (topics[0], 1, 3, f"{topics[0]}:7".encode()),
    ]
    monkeypatch.setattr("cdclake.ingest.sources.FETCH_WINDOW_GAP", 1)  # 0, 2, 4: three windows, three rounds
    spread_out = [(topics[0], 0, o) for o in (4, 0, 2)]
    assert [r[4] for r in source.fetch(spread_out, timeout_s=30)] == [4, 0, 2]
