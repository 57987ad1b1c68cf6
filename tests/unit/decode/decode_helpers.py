"""Builders of small Debezium envelopes for the decoder tests."""

from __future__ import annotations

import json
from typing import Any

SOURCES: dict[str, dict[str, Any]] = {
    "postgresql": {
        "version": "2.7.0.Final", "connector": "postgresql", "name": "pg", "ts_ms": 1700000000000,
        "snapshot": "false", "db": "app", "schema": "public", "table": "t",
        "sequence": '["100","120"]', "txId": 7, "lsn": 120,
    },
    "mysql": {
        "version": "2.7.0.Final", "connector": "mysql", "name": "my", "ts_ms": 1700000000000, "snapshot": "false",
        "db": "app", "table": "t", "server_id": 1, "gtid": None, "file": "mysql-bin.000003", "pos": 154, "row": 0,
    },
    "mariadb": {
        "version": "2.7.0.Final", "connector": "mariadb", "name": "maria", "ts_ms": 1700000000000,
        "snapshot": "false", "db": "app", "table": "t", "server_id": 1, "file": "mariadb-bin.000001", "pos": 4,
        "row": 0,
    },
    "informix": {
        "version": "3.3.1.Final", "connector": "informix", "name": "ifx", "ts_ms": 1700000000000,
        "snapshot": "false", "db": "testdb", "schema": "informix", "table": "t",
        "commit_lsn": "627404540760620", "change_lsn": "627404540485812", "txId": "157",
    },
    "mongodb": {
        "version": "2.5.4.Final", "connector": "mongodb", "name": "mongo", "ts_ms": 1700000000000,
        "snapshot": "false", "db": "app", "rs": "rs0", "collection": "t", "ord": 1,
    },
}  # fmt: skip


def topic_of(connector: str) -> str:
    src = SOURCES[connector]
    middle = src.get("schema") or src["db"]
    return f"{src['name']}.{middle}.{src.get('table') or src.get('collection')}"


def envelope_schema(row_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A Connect Envelope schema with ``before``/``after`` of the given fields (source kept loose)."""
    row = {"type": "struct", "optional": True, "name": "x.Value", "fields": row_fields}
    return {
        "type": "struct",
        "name": "x.Envelope",
        "optional": False,
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"type": "struct", "optional": False, "field": "source", "fields": []},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }


def value(
    connector: str,
    after: dict[str, Any] | None,
    *,
    before: dict[str, Any] | None = None,
    op: str = "c",
    row_fields: list[dict[str, Any]] | None = None,
    source: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    """The JSON text of a change event; with ``row_fields`` wrapped as schemas-on, else a bare payload."""
    payload: dict[str, Any] = {
        "before": before,
        "after": after,
        "source": {**SOURCES[connector], **(source or {})},
        "op": op,
        "ts_ms": 1700000000500,
        **(extra or {}),
    }
    if row_fields is None:
        return json.dumps(payload)
    return json.dumps({"schema": envelope_schema(row_fields), "payload": payload})


def key(fields: dict[str, Any], *, schemas: bool = True, types: dict[str, str] | None = None) -> str:
    if not schemas:
        return json.dumps(fields)
    schema = {
        "type": "struct",
        "name": "x.Key",
        "optional": False,
        "fields": [{"field": k, "type": (types or {}).get(k, "int32"), "optional": False} for k in fields],
    }
    return json.dumps({"schema": schema, "payload": fields})


def record(topic: str, offset: int, value_text: str | None, key_text: str | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": kw.pop("partition", 0),
        "offset": offset,
        "timestamp": 1700000001000,
        "key": key_text,
        "value": value_text,
        "headers": kw.pop("headers", None),
    }


def assert_frame_rows(frame: Any, expected: list[Any]) -> None:
    """Whole-frame equality on collected rows (order-insensitive).

    ``pyspark.testing.assertDataFrameEqual`` imports pyspark.pandas, which fails with the pinned pandas; this
    compares every column of every row the same way.
    """

    def norm(row: Any) -> str:
        return repr(sorted(row.asDict(recursive=True).items()))

    got = sorted(norm(r) for r in frame.collect())
    want = sorted(norm(r) for r in expected)
    assert got == want, [g for g in got if g not in want] + ["<-got|want->"] + [w for w in want if w not in got]


def decode_values(
    spark: Any, fields: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> tuple[dict[int, Any], dict[int, str]]:
    """Decode one MySQL change event per row dict (schemas off, ``fields`` as the schema source).

    Returns the decoded rows by Kafka offset (the row's index) and the dead letters' reasons by offset.
    """
    from cdclake.decode import ConnectSchemaSource, DecodeOptions, decode_records, records_from_dicts

    topic = topic_of("mysql")
    options = DecodeOptions(
        value_schemas_enabled=False,
        key_schemas_enabled=False,
        schema_source=ConnectSchemaSource({topic: {"type": "struct", "fields": fields}}),
        include_before=False,
    )
    records = [record(topic, i, value("mysql", row), json.dumps({"id": i})) for i, row in enumerate(rows)]
    batch = decode_records(records_from_dicts(spark, records), options=options)
    decoded = {r["_cdc_offset"]: r for frame in batch.tables.values() for r in frame.collect()}
    dead = {r["offset"]: r["reason"] for r in batch.dead_letters.collect()}
    return decoded, dead
