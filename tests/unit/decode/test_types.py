# ruff: noqa: E501
"""Logical types decode to exact values and Spark types, schemas on and off, per connector."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal

import pytest
from decode_helpers import assert_frame_rows, key, record, topic_of, value
from pyspark.sql import Row, SparkSession
from pyspark.sql import types as T

from cdclake.decode import ConnectSchemaSource, DecodeOptions, TableId, decode_records, records_from_dicts
from cdclake.decode.reference import encode_unscaled

pytestmark = pytest.mark.spark

FIELDS = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "i8", "type": "int8"},
    {"field": "i64", "type": "int64"},
    {"field": "f32", "type": "float32"},
    {"field": "f64", "type": "float64"},
    {"field": "flag", "type": "boolean"},
    {"field": "s", "type": "string"},
    {"field": "raw", "type": "bytes"},
    {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"field": "wide", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "3", "connect.decimal.precision": "65"}},
    {"field": "num", "type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
     "fields": [{"field": "scale", "type": "int32"}, {"field": "value", "type": "bytes"}]},
    {"field": "d", "type": "int32", "name": "io.debezium.time.Date"},
    {"field": "t_ms", "type": "int32", "name": "io.debezium.time.Time"},
    {"field": "t_us", "type": "int64", "name": "io.debezium.time.MicroTime"},
    {"field": "t_ns", "type": "int64", "name": "io.debezium.time.NanoTime"},
    {"field": "ts_ms", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "ts_us", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "ts_ns", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
    {"field": "tsz", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "tz", "type": "string", "name": "io.debezium.time.ZonedTime"},
    {"field": "yr", "type": "int32", "name": "io.debezium.time.Year"},
    {"field": "kd", "type": "int32", "name": "org.apache.kafka.connect.data.Date"},
    {"field": "kt", "type": "int32", "name": "org.apache.kafka.connect.data.Time"},
    {"field": "kts", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
    {"field": "js", "type": "string", "name": "io.debezium.data.Json"},
    {"field": "en", "type": "string", "name": "io.debezium.data.Enum", "parameters": {"allowed": "a,b"}},
    {"field": "es", "type": "string", "name": "io.debezium.data.EnumSet", "parameters": {"allowed": "a,b"}},
    {"field": "bits", "type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "10"}},
    {"field": "uid", "type": "string", "name": "io.debezium.data.Uuid"},
    {"field": "xml", "type": "string", "name": "io.debezium.data.Xml"},
    {"field": "geo", "type": "struct", "name": "io.debezium.data.geometry.Point",
     "fields": [{"field": "x", "type": "float64"}, {"field": "y", "type": "float64"},
                {"field": "wkb", "type": "bytes"}, {"field": "srid", "type": "int32"}]},
    {"field": "tags", "type": "array", "items": {"type": "string"}},
    {"field": "amounts", "type": "array", "items": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                                                    "parameters": {"scale": "1"}}},
    {"field": "dur", "type": "int64", "name": "io.debezium.time.MicroDuration"},
]  # fmt: skip

AFTER = {
    "id": 1, "i8": -5, "i64": 9007199254740993, "f32": 1.5, "f64": -2.25, "flag": True, "s": "héllo",
    "raw": "AAEC/w==", "price": encode_unscaled(-12345), "wide": encode_unscaled(-(10**37) - 7),
    "num": {"scale": 4, "value": encode_unscaled(-31415926)}, "d": 19000, "t_ms": 3723004,
    "t_us": 3723004005, "t_ns": 3723004005006, "ts_ms": 1700000000123, "ts_us": 1700000000123456,
    "ts_ns": 1700000000123456789, "tsz": "2023-11-14T23:13:20.123456+02:00", "tz": "10:15:30Z", "yr": 2024,
    "kd": -1, "kt": 1000, "kts": -1, "js": '{"a": 1}', "en": "a", "es": "a,b", "bits": "AQI=",
    "uid": "0b9f5a2e-1111-2222-3333-444455556666", "xml": "<a/>",
    "geo": {"x": 1.0, "y": 2.0, "wkb": "AQ==", "srid": 4326}, "tags": ["x", "y"],
    "amounts": [encode_unscaled(15), encode_unscaled(-1)], "dur": 3600000000,
}  # fmt: skip

EXPECTED = Row(
    id=1, i8=-5, i64=9007199254740993, f32=1.5, f64=-2.25, flag=True, s="héllo", raw=b"\x00\x01\x02\xff",
    price=Decimal("-123.45"), wide="-10000000000000000000000000000000000.007", num="-3141.5926",
    d=date(2022, 1, 8), t_ms=3723004000, t_us=3723004005, t_ns=3723004005,
    ts_ms=datetime(2023, 11, 14, 22, 13, 20, 123000), ts_us=datetime(2023, 11, 14, 22, 13, 20, 123456),
    ts_ns=datetime(2023, 11, 14, 22, 13, 20, 123456), tsz=datetime(2023, 11, 14, 21, 13, 20, 123456),
    tz="10:15:30Z", yr=2024, kd=date(1969, 12, 31), kt=1000000, kts=datetime(1969, 12, 31, 23, 59, 59, 999000),
    js='{"a": 1}', en="a", es="a,b", bits=b"\x01\x02", uid="0b9f5a2e-1111-2222-3333-444455556666",
    xml="<a/>", geo=Row(x=1.0, y=2.0, wkb=b"\x01", srid=4326), tags=["x", "y"],
    amounts=[Decimal("1.5"), Decimal("-0.1")], dur=3600000000,
)  # fmt: skip

SPARK_TYPES = {
    "i8": T.IntegerType(), "i64": T.LongType(), "f32": T.FloatType(), "raw": T.BinaryType(),
    "price": T.DecimalType(10, 2), "wide": T.StringType(), "num": T.StringType(), "d": T.DateType(),
    "t_ms": T.LongType(), "t_ns": T.LongType(), "ts_ms": T.TimestampNTZType(), "ts_us": T.TimestampNTZType(),
    "tsz": T.TimestampType(), "kts": T.TimestampNTZType(), "bits": T.BinaryType(),
    "amounts": T.ArrayType(T.DecimalType(38, 1)), "dur": T.LongType(),
}  # fmt: skip


@pytest.mark.parametrize("connector", ["postgresql", "mysql", "mariadb", "informix"])
@pytest.mark.parametrize("schemas", [True, False], ids=["schemas-on", "schemas-off"])
def test_every_type_decodes(spark: SparkSession, connector: str, schemas: bool) -> None:
    topic = topic_of(connector)
    text = value(connector, AFTER, row_fields=FIELDS if schemas else None)
    options = DecodeOptions(
        key_schemas_enabled=schemas,
        value_schemas_enabled=schemas,
        schema_source=ConnectSchemaSource({topic: {"type": "struct", "fields": FIELDS}}),
        include_before=False,
    )
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, text, key({"id": 1}, schemas=schemas))]), options=options
    )
    (table_id,) = batch.tables
    frame = batch.tables[table_id].select(*[fld["field"] for fld in FIELDS])
    assert_frame_rows(frame, [EXPECTED])
    types = {fld.name: fld.dataType for fld in frame.schema.fields}
    assert {k: types[k] for k in SPARK_TYPES} == SPARK_TYPES
    meta = batch.table_info[table_id].schema["price"].metadata
    assert meta["cdc.logical.type"] == "org.apache.kafka.connect.data.Decimal"
    assert json.loads(meta["cdc.parameters"]) == {"scale": "2", "connect.decimal.precision": "10"}
    assert batch.table_info[table_id].key_columns == ("id",)
    assert batch.table_info[table_id].schema["bits"].metadata["cdc.bits.byte_order"] == "little"
    assert batch.dead_letters.count() == 0


def test_postgres_toast_placeholder_marks_keep_columns(spark: SparkSession) -> None:
    fields = [
        {"field": "id", "type": "int32"},
        {"field": "body", "type": "string"},
        {"field": "blob", "type": "bytes"},
        {"field": "arr", "type": "array", "items": {"type": "string"}},
        {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2", "connect.decimal.precision": "12"}},
        {"field": "doc", "type": "string", "name": "io.debezium.data.Json"},
        {"field": "other", "type": "string"},
    ]  # fmt: skip
    after = {"id": 1, "body": "__debezium_unavailable_value", "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
             "arr": ["__debezium_unavailable_value"], "amount": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
             "doc": "__debezium_unavailable_value", "other": "x"}  # fmt: skip
    topic = topic_of("postgresql")
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, value("postgresql", after, op="u", row_fields=fields))]),
        options=DecodeOptions(include_before=False),
    )
    (frame,) = batch.tables.values()
    # a TOASTed numeric (its placeholder is base64, like bytea's) keeps its stored value too: not a dead letter
    assert batch.dead_letters.count() == 0
    assert_frame_rows(
        frame.select("id", "body", "blob", "arr", "amount", "doc", "other", "_cdc_keep_columns"),
        [Row(id=1, body=None, blob=None, arr=None, amount=None, doc=None, other="x",
             _cdc_keep_columns=["body", "blob", "arr", "amount", "doc"])],
    )  # fmt: skip


def test_mysql_unsigned_and_tinyint1(spark: SparkSession) -> None:
    """BIGINT UNSIGNED in precise mode is Decimal(20,0); TINYINT(1) is int16 (or boolean with a converter)."""
    fields = [
        {"field": "id", "type": "int32"},
        {"field": "big", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "0", "connect.decimal.precision": "20"}},
        {"field": "tiny", "type": "int16"},
        {"field": "flag", "type": "boolean"},
        {"field": "uint", "type": "int64"},
    ]  # fmt: skip
    after = {"id": 1, "big": encode_unscaled(2**64 - 1), "tiny": 1, "flag": False, "uint": 4294967295}
    topic = topic_of("mysql")
    batch = decode_records(
        records_from_dicts(spark, [record(topic, 0, value("mysql", after, row_fields=fields))]),
        options=DecodeOptions(include_before=False),
    )
    (frame,) = batch.tables.values()
    assert_frame_rows(
        frame.select("id", "big", "tiny", "flag", "uint"),
        [Row(id=1, big=Decimal(2**64 - 1), tiny=1, flag=False, uint=4294967295)],
    )


def test_column_added_mid_batch_unions_by_name(spark: SparkSession) -> None:
    topic = topic_of("mysql")
    v1 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "string"}]
    v2 = [*v1, {"field": "b", "type": "int64"}]
    rows = [
        record(topic, 0, value("mysql", {"id": 1, "a": "x"}, row_fields=v1)),
        record(topic, 1, value("mysql", {"id": 2, "a": "y", "b": 5}, row_fields=v2, source={"pos": 200})),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (table_id,) = batch.tables
    assert_frame_rows(batch.tables[table_id].select("id", "a", "b"), [Row(id=1, a="x", b=None), Row(id=2, a="y", b=5)])
    assert batch.table_info[table_id].schema_versions == 2


def test_key_move_headers_and_tombstone(spark: SparkSession) -> None:
    topic = topic_of("mysql")
    fields = [{"field": "id", "type": "int32"}]
    rows = [
        record(topic, 0, value("mysql", None, before={"id": 1}, op="d", row_fields=fields), key({"id": 1}),
               headers=[{"key": "__debezium.newkey", "value": '{"id":2}'}]),
        record(topic, 1, None, key({"id": 1})),
        record(topic, 2, value("mysql", {"id": 2}, row_fields=fields), key({"id": 2}),
               headers=[{"key": "__debezium.oldkey", "value": '{"id":1}'}]),
    ]  # fmt: skip
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (frame,) = batch.tables.values()
    assert_frame_rows(
        frame.select("id", "_cdc_op", "_cdc_old_key", "_cdc_new_key", "_cdc_before"),
        [
            Row(id=1, _cdc_op="d", _cdc_old_key=None, _cdc_new_key='{"id":2}', _cdc_before=Row(id=1)),
            Row(id=2, _cdc_op="c", _cdc_old_key='{"id":1}', _cdc_new_key=None, _cdc_before=None),
        ],
    )
    counts = batch.counts()
    assert counts["tombstones"] == 1
    assert counts.table_ops(TableId(server="my", namespace="app", table="t"))["d"] == 1
    assert counts.table_ops(TableId(server="my", namespace="app", table="t"))["c"] == 1


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [(True, "true"), (False, None), ("true", "true"), ("first", "first"),
     ("first_in_data_collection", "first_in_data_collection"), ("last_in_data_collection", "last_in_data_collection"),
     ("last", "last"), ("incremental", "incremental"), ("false", None), (None, None)],
)  # fmt: skip
def test_snapshot_marker_normalised(spark: SparkSession, raw: object, normalised: str | None) -> None:
    topic = topic_of("postgresql")
    text = value(
        "postgresql", {"id": 1}, op="r", row_fields=[{"field": "id", "type": "int32"}], source={"snapshot": raw}
    )
    batch = decode_records(records_from_dicts(spark, [record(topic, 0, text)]), options=DecodeOptions())
    (frame,) = batch.tables.values()
    assert [r["_cdc_snapshot"] for r in frame.collect()] == [normalised]


def test_heartbeats_signals_and_watermarks_are_skipped(spark: SparkSession) -> None:
    fields = [
        {"field": "id", "type": "string"},
        {"field": "type", "type": "string"},
        {"field": "data", "type": "string"},
    ]
    sig_topic = "pg.public.debezium_signal"
    src = {"table": "debezium_signal"}
    rows = [
        record("__debezium-heartbeat.pg", 0, '{"schema":{"type":"struct"},"payload":{"ts_ms":1}}'),
        record(sig_topic, 0, value("postgresql", {"id": "1", "type": "execute-snapshot", "data": "{}"}, row_fields=fields, source=src)),
        record(sig_topic, 1, value("postgresql", {"id": "2", "type": "snapshot-window-open", "data": "{}"}, row_fields=fields, source=src)),
        record(sig_topic, 2, value("postgresql", {"id": "3", "type": "snapshot-window-close", "data": "{}"}, row_fields=fields, source=src)),
    ]  # fmt: skip
    batch = decode_records(
        records_from_dicts(spark, rows), options=DecodeOptions(signal_tables=frozenset({"public.debezium_signal"}))
    )
    assert batch.tables == {}
    counts = batch.counts()
    assert (counts["heartbeats"], counts["signals_skipped"], counts["watermarks_skipped"]) == (1, 1, 2)
