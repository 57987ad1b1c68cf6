"""Discovery through a :class:`cdclake.decode.RecordSampler` decodes exactly what discovery by passes decodes.

The ingestion job's sampler reads single records from Kafka (tests/integration/test_kafka_source.py); here a
sampler over the captured records themselves stands in for the broker, to compare the discovery paths on
real captures without one. Discovery from the sample alone (``decode_counted``) must give the same rows and
counts, and fall back to a pass whenever the sample missed a schema version or a topic.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from decode_helpers import record, topic_of, value
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.decode import DecodeOptions, decode_counted, decode_records, read_jsonl, records_from_dicts
from cdclake.decode.records import SampleRecord, sample_records
from cdclake.exceptions import UnsampledRecordsError

pytestmark = pytest.mark.spark

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"


class FrameSampler:
    """Samples a records frame: each topic-partition's last record only (the fewest a sampler gives)."""

    def __init__(self, frame: DataFrame) -> None:
        self.frame, self.spread_calls, self.points = frame, 0, []  # type: ignore[var-annotated]

    def spread(self) -> DataFrame:
        self.spread_calls += 1
        last = self.frame.groupBy("topic", "partition").agg(F.max("offset").alias("offset"))
        return self.frame.join(last, ["topic", "partition", "offset"])

    def spread_rows(self) -> list[SampleRecord]:
        return sample_records(self.spread())

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        self.points += list(points)
        wanted = self.frame.sparkSession.createDataFrame(list(points), "topic string, partition int, offset long")
        return self.frame.join(wanted, ["topic", "partition", "offset"])


def _rows(frame: DataFrame) -> list[str]:
    # compared as text: the captures hold NaN doubles, and NaN != NaN
    return sorted(repr(tuple(r)) for r in frame.collect())


@pytest.mark.parametrize("capture", ["pg_all_types_schemas.jsonl", "mariadb_ddl_sequence.jsonl"])
def test_sampled_discovery_decodes_the_same_rows_and_side_outputs(spark: SparkSession, capture: str) -> None:
    records = read_jsonl(spark, CAPTURES / capture).persist()
    options = DecodeOptions(include_before=False)
    by_passes = decode_records(records, options=options)
    sampler = FrameSampler(records)
    sampled = decode_records(records, options=options, sampler=sampler)

    assert sampler.spread_calls == 1 and sampler.points, "discovery must take its samples from the sampler"
    assert sampled.table_info == by_passes.table_info
    assert sampled.schema_cuts == by_passes.schema_cuts
    assert set(sampled.tables) == set(by_passes.tables)
    for table_id, frame in by_passes.tables.items():
        assert _rows(sampled.tables[table_id]) == _rows(frame), table_id
    for name in ("transactions", "schema_changes"):
        assert _rows(getattr(sampled, name)) == _rows(getattr(by_passes, name)), name
    assert sampled.dead_letters.count() == by_passes.dead_letters.count() == 0
    records.unpersist()


@pytest.mark.parametrize(
    ("capture", "discovery"),
    # the MariaDB capture changes its tables' schemas: a sample of last records cannot show every version
    [("pg_all_types_schemas.jsonl", "sample"), ("mariadb_ddl_sequence.jsonl", "pass")],
)
def test_discovery_from_the_sample_alone_decodes_and_counts_the_same(
    spark: SparkSession, capture: str, discovery: str
) -> None:
    records = read_jsonl(spark, CAPTURES / capture).persist()
    options = DecodeOptions(include_before=False)
    by_passes = decode_records(records, options=options)
    batch, counts = decode_counted(records, options=options, sampler=FrameSampler(records))
    try:
        assert batch.discovery == discovery
        assert counts == by_passes.counts()
        assert counts["data"] > 0
        assert batch.table_info == by_passes.table_info
        for table_id, frame in by_passes.tables.items():
            assert _rows(batch.tables[table_id]) == _rows(frame), table_id
        for name in ("transactions", "schema_changes"):
            assert _rows(getattr(batch, name)) == _rows(getattr(by_passes, name)), name
    finally:
        batch.release()
        records.unpersist()


V1 = [{"field": "id", "type": "int32"}, {"field": "n", "type": "int32"}]
V2 = [*V1, {"field": "extra", "type": "string"}]


def _row(topic: str, offset: int, after: dict[str, object], fields: list[dict[str, object]]) -> dict[str, object]:
    return record(topic, offset, value("mysql", after, row_fields=fields), key_text=json.dumps({"id": after["id"]}))


def test_a_schema_version_the_sample_missed_fails_the_pass_and_is_decoded_by_a_pass(spark: SparkSession) -> None:
    """The sample (each partition's last record) shows V1 only; offset 1 has a column V1 lacks."""
    topic = topic_of("mysql")
    rows = [
        _row(topic, 0, {"id": 1, "n": 1}, V1),
        _row(topic, 1, {"id": 2, "n": 2, "extra": "kept"}, V2),
        _row(topic, 2, {"id": 3, "n": 3}, V1),
    ]
    records = records_from_dicts(spark, rows)
    trusting = decode_records(records, options=DecodeOptions(), sampler=FrameSampler(records), sample_only=True)
    assert trusting.discovery == "sample"
    (info,) = trusting.table_info.values()
    assert info.schema.names == ["id", "n"], "the sample showed V1 only"
    with pytest.raises(UnsampledRecordsError, match=rf"{topic} .*\(partition 0, offset 1\)"):
        trusting.counts()

    batch, counts = decode_counted(records, options=DecodeOptions(), sampler=FrameSampler(records))
    try:
        assert batch.discovery == "pass"
        (frame,) = batch.tables.values()
        assert sorted((r["id"], r["n"], r["extra"]) for r in frame.collect()) == [
            (1, 1, None),
            (2, 2, "kept"),
            (3, 3, None),
        ]
        assert counts["data"] == 3 and counts["dead_letters"] == 0
    finally:
        batch.release()


class _BlindSampler(FrameSampler):
    """A sampler that never returns the records of one topic (as a Kafka read of an emptied range would not)."""

    def __init__(self, frame: DataFrame, blind: str) -> None:
        super().__init__(frame)
        self.blind = blind

    def spread(self) -> DataFrame:
        return super().spread().where(F.col("topic") != self.blind)


def test_a_topic_the_sample_missed_fails_the_pass_and_is_decoded_by_a_pass(spark: SparkSession) -> None:
    seen, missed = topic_of("mysql"), topic_of("mysql") + "2"
    rows = [_row(seen, 0, {"id": 1, "n": 1}, V1), _row(missed, 0, {"id": 2, "n": 2}, V1)]
    records = records_from_dicts(spark, rows)
    trusting = decode_records(
        records, options=DecodeOptions(), sampler=_BlindSampler(records, missed), sample_only=True
    )
    assert trusting.discovery == "sample" and len(trusting.tables) == 1
    with pytest.raises(UnsampledRecordsError, match=rf"topic {missed}, which the sample did not show"):
        trusting.counts()

    batch, counts = decode_counted(records, options=DecodeOptions(), sampler=_BlindSampler(records, missed))
    try:
        assert batch.discovery == "pass" and counts["data"] == 2
        # both topics carry table app.t (source.table), so its rows come from both
        ((table_id, frame),) = batch.tables.items()
        assert sorted(batch.table_info[table_id].topics) == sorted([seen, missed])
        assert sorted(r["id"] for r in frame.collect()) == [1, 2]
    finally:
        batch.release()


def test_tombstones_and_skipped_topics_count_the_same_by_sample_and_by_pass(spark: SparkSession) -> None:
    """Counts come from the decoding pass itself: tombstones of data, transaction and heartbeat topics alike."""
    topic = topic_of("mysql")
    tx = (
        '{"schema":{"type":"struct"},"payload":{"status":"BEGIN","id":"t1","event_count":null,"data_collections":null}}'
    )
    rows = [
        _row(topic, 0, {"id": 1, "n": 1}, V1),
        record(topic, 1, None, key_text='{"id":1}'),
        _row(topic, 2, {"id": 2, "n": 2}, V1),
        record("my.transaction", 0, tx),
        record("my.transaction", 1, None),
        record("my.transaction", 2, tx.replace("t1", "t2")),
        record("__debezium-heartbeat.my", 0, '{"schema":{"type":"struct"},"payload":{"ts_ms":1}}'),
        record("__debezium-heartbeat.my", 1, None),
        record("__debezium-heartbeat.my", 2, '{"schema":{"type":"struct"},"payload":{"ts_ms":2}}'),
    ]
    records = records_from_dicts(spark, rows)
    by_pass = decode_records(records, options=DecodeOptions()).counts()
    batch, counts = decode_counted(records, options=DecodeOptions(), sampler=FrameSampler(records))
    try:
        assert batch.discovery == "sample"
        assert counts == by_pass
        assert (counts["data"], counts["tombstones"], counts["transactions"], counts["heartbeats"]) == (2, 3, 2, 2)
        assert sum(n for k, n in counts.records.items() if k != "data") + counts["data"] == 9
    finally:
        batch.release()


def test_the_driver_and_spark_cut_the_same_schema_prefix(spark: SparkSession) -> None:
    """Discovery from the sample cuts each record's schema text in the driver (schema_prefix_text); a pass
    cuts it in Spark (schema_prefix); the decoder skips that prefix, so both must agree byte for byte."""
    from cdclake.decode.layout import schema_prefix, schema_prefix_text

    schema = {"type": "struct", "fields": [{"field": "id", "type": "int32"}], "name": "k.Value"}
    compact = json.dumps({"schema": schema, "payload": {"id": 1}}, separators=(",", ":"))
    spaced = json.dumps({"schema": schema, "payload": {"id": 2}})  # Python's default layout: ", " and ": "
    values = [
        compact,
        spaced,
        json.dumps({"payload": {"id": 3}, "schema": schema}),  # payload first: no layout
        '{"schema":{"type":"struct"}}',  # no payload after the schema
        '{"id": 4}',  # schemas off
        "é" + compact,  # not an envelope start
    ]
    got = spark.createDataFrame([(v,) for v in values], "value string").select(schema_prefix(F.col("value")).alias("p"))
    in_spark = [r["p"] for r in got.collect()]
    in_driver = [schema_prefix_text(v) for v in values]
    assert in_driver == in_spark
    assert in_driver[0] == compact[: compact.index(',"payload":') + len(',"payload":')]
    assert in_driver[1] is not None and in_driver[1].endswith(', "payload": ')
    assert in_driver[2:] == [None, None, None, None]
