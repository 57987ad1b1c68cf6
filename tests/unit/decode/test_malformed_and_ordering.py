"""Malformed records become dead letters (the batch continues); positions order correctly."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from decode_helpers import record, topic_of, value
from pyspark.sql import SparkSession

from cdclake.decode import ConnectSchemaSource, DecodeOptions, decode_records, records_from_dicts

pytestmark = pytest.mark.spark

FIELDS = [{"field": "id", "type": "int32"}, {"field": "n", "type": "int64"}]


def test_malformed_records_are_dead_letters(spark: SparkSession) -> None:
    topic = topic_of("mysql")
    good = value("mysql", {"id": 1, "n": 2}, row_fields=FIELDS)
    rows = [
        record(topic, 0, good),
        record(topic, 1, "this is not json"),
        record(topic, 2, json.dumps({"schema": json.loads(good)["schema"]})),
        record(topic, 3, value("mysql", {"id": "abc", "n": 2}, row_fields=FIELDS)),
        record(topic, 4, value("mysql", {"id": 1, "n": 2}, op="x", row_fields=FIELDS)),
        record("other.app.t", 0, value("mysql", {"id": 1}, row_fields=FIELDS, source={"connector": "oracle"})),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    dead = sorted((r["topic"], r["offset"], r["reason"]) for r in batch.dead_letters.collect())
    assert dead == [
        ("my.app.t", 1, "invalid_json"),
        ("my.app.t", 2, "missing_payload"),
        ("my.app.t", 3, "type_mismatch"),
        ("my.app.t", 4, "unknown_op"),
        ("other.app.t", 0, "unsupported_connector"),
    ]
    (frame,) = batch.tables.values()
    assert [(r["id"], r["n"]) for r in frame.collect()] == [(1, 2)]
    assert batch.counts()["dead_letters"] == 5


def test_decimal_without_scale_with_schemas_off_is_dead_lettered(spark: SparkSession) -> None:
    topic = topic_of("mysql")
    options = DecodeOptions(
        value_schemas_enabled=False,
        key_schemas_enabled=False,
        schema_source=ConnectSchemaSource({topic: {"id": "int32", "price": "decimal"}}),
    )
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, value("mysql", {"id": 1, "price": "AQ=="}))]), options=options
    )
    assert batch.tables == {}
    assert [r["reason"] for r in batch.dead_letters.collect()] == ["schema_error"]


def test_schemas_off_without_schema_source_is_dead_lettered(spark: SparkSession) -> None:
    topic = topic_of("postgresql")
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, value("postgresql", {"id": 1}))]),
        options=DecodeOptions(value_schemas_enabled=False),
    )
    assert [r["reason"] for r in batch.dead_letters.collect()] == ["no_schema"]


def test_decimal_wider_than_16_bytes_is_exact_string_or_dead_lettered(spark: SparkSession) -> None:
    """p > 38 -> lossless string at any width; without precision (decimal(38,s)) a too-wide value is dead-lettered."""
    from cdclake.decode.reference import encode_unscaled

    def decode(params: dict[str, str], unscaled: int):  # noqa: ANN202
        fields = [{"field": "id", "type": "int32"},
                  {"field": "x", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                   "parameters": params}]  # fmt: skip
        row = value("mysql", {"id": 1, "x": encode_unscaled(unscaled)}, row_fields=fields)
        return decode_records(records_from_dicts(spark, [record(topic_of("mysql"), 0, row)]), options=DecodeOptions())

    wide = decode({"scale": "2", "connect.decimal.precision": "65"}, -(10**60) - 7)
    assert wide.dead_letters.count() == 0
    (frame,) = wide.tables.values()
    assert frame.collect()[0]["x"] == "-1" + "0" * 58 + ".07"
    narrow = decode({"scale": "0"}, 10**40)
    assert [r["reason"] for r in narrow.dead_letters.collect()] == ["unrepresentable_value"]


def _positions(spark: SparkSession, connector: str, events: list[tuple[dict[str, object], str, int]]) -> list[int]:
    """Decode events (source overrides, op, kafka offset); return the offsets sorted by ``_cdc_position``."""
    topic = topic_of(connector)
    rows = [
        record(topic, offset, value(connector, {"id": 1, "n": 0}, op=op, row_fields=FIELDS, source=src))
        for src, op, offset in events
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (frame,) = batch.tables.values()
    return [r["_cdc_offset"] for r in frame.orderBy("_cdc_position").collect()]


def test_postgres_orders_by_commit_lsn_then_lsn(spark: SparkSession) -> None:
    events = [
        ({"sequence": '["200","150"]', "lsn": 150}, "u", 0),  # later commit, earlier lsn
        ({"sequence": '["100","180"]', "lsn": 180}, "u", 1),
        ({"sequence": '["200","210"]', "lsn": 210}, "u", 2),
    ]
    assert _positions(spark, "postgresql", events) == [1, 0, 2]


def test_binlog_file_rollover(spark: SparkSession) -> None:
    events = [
        ({"file": "mysql-bin.000010", "pos": 4}, "u", 0),
        ({"file": "mysql-bin.000009", "pos": 9999}, "u", 1),
        ({"file": "mysql-bin.000010", "pos": 4, "row": 1}, "u", 2),
    ]
    assert _positions(spark, "mysql", events) == [1, 0, 2]


def test_informix_lsns_beyond_int64(spark: SparkSession) -> None:
    big = 2**63 + 5
    events = [
        ({"commit_lsn": str(big + 1), "change_lsn": "1"}, "u", 0),
        ({"commit_lsn": str(big), "change_lsn": str(big + 100)}, "u", 1),
        ({"commit_lsn": "9", "change_lsn": "9"}, "u", 2),
    ]
    assert _positions(spark, "informix", events) == [2, 1, 0]
    topic = topic_of("informix")
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, value("informix", {"id": 1, "n": 0}, row_fields=FIELDS,
                                                               source={"commit_lsn": str(big), "change_lsn": "7"}))]),
        options=DecodeOptions(),
    )  # fmt: skip
    (frame,) = batch.tables.values()
    assert frame.collect()[0]["_cdc_position"] == [Decimal(big), Decimal(7), Decimal(1), Decimal(0), Decimal(0)]


@pytest.mark.parametrize("connector", ["postgresql", "mysql", "informix"])
def test_incremental_snapshot_read_never_wins_over_later_streamed_change(spark: SparkSession, connector: str) -> None:
    """The read carries the streaming position at window close; a streamed update delivered after it wins."""
    events = [
        ({"snapshot": "incremental"}, "r", 10),  # same source position as the update below
        ({}, "u", 11),
    ]
    assert _positions(spark, connector, events) == [10, 11]
    # an update *before* the read (older source position) loses to the read
    older = {
        "postgresql": {"sequence": '["1","1"]'},
        "mysql": {"pos": 1},
        "informix": {"commit_lsn": "1", "change_lsn": "1"},
    }[connector]
    assert _positions(spark, connector, [(older, "u", 9), ({"snapshot": "incremental"}, "r", 10)]) == [9, 10]


def test_incompatible_type_change_inside_a_batch_cuts_the_topic_instead_of_dead_lettering(spark: SparkSession) -> None:
    """string -> int inside one range: the old records decode with their own type, the rest is left to a cut."""
    topic = topic_of("mysql")
    v1 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "string"}, {"field": "n", "type": "int32"}]
    v2 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "string"}, {"field": "n", "type": "int64"}]
    v3 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "int32"}, {"field": "n", "type": "int64"}]
    rows = [
        record(topic, 0, value("mysql", {"id": 1, "a": "one", "n": 1}, row_fields=v1)),
        record(topic, 1, value("mysql", {"id": 2, "a": "two", "n": 2**40}, row_fields=v2)),  # widening: no cut
        record(topic, 2, value("mysql", {"id": 3, "a": 3, "n": 3}, row_fields=v3)),
        record(topic, 3, value("mysql", {"id": 4, "a": 4, "n": 4}, row_fields=v3)),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (frame,) = batch.tables.values()
    assert sorted((r["id"], r["a"], r["n"]) for r in frame.collect()) == [(1, "one", 1), (2, "two", 2**40)]
    assert batch.dead_letters.count() == 0
    assert batch.schema_cuts == {(topic, 0): 2}
    (reason,) = batch.schema_cut_reasons.values()
    assert "column a: string -> int" in reason and f"{topic}/0@2" in reason
    (info,) = batch.table_info.values()
    assert info.schema["n"].dataType.simpleString() == "bigint" and info.schema["a"].dataType.simpleString() == "string"

    # the next batch starts at the cut: the new schema alone, no cut
    rest = decode_records(records_from_dicts(spark, rows[2:]), options=DecodeOptions())
    (frame,) = rest.tables.values()
    assert sorted((r["id"], r["a"]) for r in frame.collect()) == [(3, 3), (4, 4)] and rest.schema_cuts == {}


def test_a_materialised_batch_gives_the_same_rows_and_the_raw_dead_letters(spark: SparkSession) -> None:
    """materialise() decodes once into a cache: same change rows, counts, and dead letters with their exact text."""
    topic = topic_of("mysql")
    bad_value = value("mysql", {"id": "abc", "n": 2}, row_fields=FIELDS)
    rows = [
        record(topic, 0, value("mysql", {"id": 1, "n": 2}, row_fields=FIELDS), key_text='{"id":1}'),
        record(topic, 1, bad_value, key_text='{"id":"abc"}'),
        record(topic, 2, value("mysql", {"id": 3, "n": 4}, row_fields=FIELDS), key_text='{"id":3}'),
    ]
    lazy = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions()).materialise()
    try:
        assert batch.counts() == lazy.counts()
        ((_, frame),) = batch.tables.items()
        ((_, lazy_frame),) = lazy.tables.items()
        assert sorted(map(tuple, frame.collect())) == sorted(map(tuple, lazy_frame.collect()))
        (dead,) = batch.dead_letters.collect()
        assert (dead["topic"], dead["offset"], dead["key"], dead["value"], dead["reason"]) == (
            topic,
            1,
            '{"id":"abc"}',
            bad_value,
            "type_mismatch",
        )
    finally:
        batch.release()
    assert not any(f.is_cached for f in (s.frame for s in batch._staged))


def test_tables_and_dead_letters_are_built_when_read_and_on_the_cache_after_materialise(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch builds its change rows and dead letters when they are first read, and builds them again on the cached
    projections once it is materialised (a frame read before would still decode the records)."""
    from cdclake.decode import batch as batch_module

    builds: list[str] = []
    for name in ("table_rows", "all_dead_letters"):
        real = getattr(batch_module, name)
        monkeypatch.setattr(batch_module, name, lambda *a, _real=real, _name=name: builds.append(_name) or _real(*a))
    topic = topic_of("mysql")
    rows = [
        record(topic, 0, value("mysql", {"id": 1, "n": 2}, row_fields=FIELDS), key_text='{"id":1}'),
        record(topic, 1, value("mysql", {"id": "abc", "n": 2}, row_fields=FIELDS), key_text='{"id":"abc"}'),
        record(topic, 2, value("mysql", {"id": 3, "n": 4}, row_fields=FIELDS), key_text='{"id":3}'),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())

    def cached(frame: Any) -> bool:
        return "InMemoryRelation" in frame._jdf.queryExecution().withCachedData().toString()

    before = next(iter(batch.tables.values()))
    assert builds == ["table_rows"]  # the dead letters not read yet, so not built
    assert not cached(before) and not cached(batch.dead_letters)
    assert batch.tables and builds == ["table_rows", "all_dead_letters"]  # each built once
    batch.materialise()
    try:
        batch.counts()
        assert cached(next(iter(batch.tables.values()))) and cached(batch.dead_letters)
        assert builds == ["table_rows", "all_dead_letters"] * 2  # again, on the cache
        assert [r["offset"] for r in batch.dead_letters.collect()] == [1]
    finally:
        batch.release()


def test_a_sampled_record_that_contradicts_its_schema_is_the_only_dead_letter_of_its_version(
    spark: SparkSession,
) -> None:
    """Discovery samples a schema version's first and last records: when one of them contradicts the schema and the
    other agrees, the bad record is a dead letter and the good one a change row (the version is not refused)."""
    topic = topic_of("mysql")
    rows = [
        record(topic, 0, value("mysql", {"id": 1, "n": 2}, row_fields=FIELDS), key_text='{"id":1}'),
        record(topic, 1, value("mysql", {"id": "abc", "n": 2}, row_fields=FIELDS), key_text='{"id":"abc"}'),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    ((_, frame),) = batch.tables.items()
    assert [(r["id"], r["n"]) for r in frame.collect()] == [(1, 2)]
    assert [(r["offset"], r["reason"]) for r in batch.dead_letters.collect()] == [(1, "type_mismatch")]
    assert batch.counts().records["data"] == 1 and batch.counts().records["dead_letters"] == 1


def test_transaction_events_of_every_shape_decode_or_become_dead_letters(spark: SparkSession) -> None:
    """BEGIN/END events through the envelope decoder: fields read as text (numbers as written), counts and times as
    whole numbers, and hostile values a dead letter or a null, never a failed batch (a ``ts_ms`` beyond Spark's
    range is a null time: Spark's ``timestamp_millis`` raises an overflow on it)."""
    schema = {"type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue"}

    def tx(offset: int, payload: object) -> dict[str, Any]:
        return record("pg.transaction", offset, json.dumps({"schema": schema, "payload": payload}))

    end = {"status": "end", "id": 571, "event_count": "3", "ts_ms": 1_700_000_000_123}
    end["data_collections"] = [{"data_collection": "s.t", "event_count": 2}, None]
    rows = [
        tx(0, {"status": "BEGIN", "id": "571", "ts_ms": 2**63 - 1}),
        tx(1, end),
        tx(2, {"status": "END", "id": "9", "data_collections": "s.t"}),
        tx(3, {"status": "END", "id": "9", "data_collections": [1]}),
        tx(4, {"status": "COMMIT", "id": "9"}),
        tx(5, {"status": "BEGIN"}),
        tx(6, [1]),
        record("pg.transaction", 7, None),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    events = {r["offset"]: r.asDict(recursive=True) for r in batch.transactions.collect()}
    assert sorted(events) == [0, 1]
    assert (events[0]["status"], events[0]["id"], events[0]["ts"]) == ("BEGIN", "571", None)
    assert (events[1]["status"], events[1]["id"], events[1]["event_count"]) == ("END", "571", 3)
    assert events[1]["data_collections"] == [{"data_collection": "s.t", "event_count": 2}, None]
    assert events[1]["ts"].year == 2023 and events[1]["server"] == "pg"
    dead = sorted((r["offset"], r["reason"]) for r in batch.dead_letters.collect())
    assert dead == [
        (2, "type_mismatch"),
        (3, "type_mismatch"),
        (4, "unknown_tx_status"),
        (5, "missing_tx_id"),
        (6, "not_an_object"),
    ]
    counts = batch.counts()
    assert (counts["transactions"], counts["dead_letters"], counts["tombstones"]) == (2, 5, 1)
