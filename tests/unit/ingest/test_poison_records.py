"""Poison records spread through a real PostgreSQL capture: every kind is dead-lettered with its reason and raw
record, the batch continues, no good row changes, and the counts reconcile.

The capture is ``tests/fixtures/captures/pg_all_types_schemas.jsonl`` (a real Debezium PostgreSQL connector with
transaction metadata, see its README). Its records keep their offsets (doubled, so a poison record sits between
every two); the same capture without the poison records is the reference lake.
"""

from __future__ import annotations

import copy
import json
import math
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from cdclake.decode.records import STRING_RECORD_SCHEMA
from cdclake.ingest.batch import run_batch
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.sources import FrameRecordSource, source_topic_patterns

pytestmark = pytest.mark.spark

CAPTURE = Path(__file__).parents[2] / "fixtures" / "captures" / "pg_all_types_schemas.jsonl"
LIMIT = 2 * 1024 * 1024  # the oversized kind is above it

#: the Kafka source's record schema (binary key and value), so non-UTF-8 bytes reach the decoder as they are
BINARY_RECORDS = T.StructType(
    [T.StructField(f.name, T.BinaryType() if f.name in ("key", "value") else f.dataType) for f in STRING_RECORD_SCHEMA]
)


def _capture(prefix: str) -> list[dict[str, Any]]:
    """The capture under a topic prefix of this test's own (so its lake tables are its own)."""
    out = []
    for line in CAPTURE.read_text().splitlines():
        rec = json.loads(line.replace("cappg", prefix))
        rec["offset"] = 2 * rec["offset"]
        out.append(rec)
    return out


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def poison_kinds(base_key: str, base_value: str) -> list[tuple[str, Any, Any, list[tuple[str, bytes]], str]]:
    """``(kind, key, value, headers, expected reason)`` of every poison record, built from a real snapshot read."""
    env = json.loads(base_value)
    env["payload"]["transaction"] = None

    def mutated(change: Any) -> str:
        e = copy.deepcopy(env)
        change(e)
        return _dumps(e)

    def setp(path: str, value: Any) -> Any:
        def change(e: dict[str, Any]) -> None:
            node = e
            *parents, last = path.split(".")
            for p in parents:
                node = node[p]
            if value is _DELETE:
                del node[last]
            else:
                node[last] = value

        return change

    def row_field(name: str) -> dict[str, Any]:
        after = next(f for f in env["schema"]["fields"] if f["field"] == "after")
        return next(f for f in after["fields"] if f["field"] == name)

    text = _dumps(env)
    schema_text = _dumps(env["schema"])
    payload_text = _dumps(env["payload"])

    def schema_edit(change: Any) -> str:
        e = copy.deepcopy(env)
        for part in ("before", "after"):
            change(next(f for f in e["schema"]["fields"] if f["field"] == part)["fields"])
        return _dumps(e)

    def unnamed(fields: list[dict[str, Any]]) -> None:
        del fields[1]["field"]

    def duplicated(fields: list[dict[str, Any]]) -> None:
        fields.append(copy.deepcopy(fields[1]))

    def contradicting(fields: list[dict[str, Any]]) -> None:
        next(f for f in fields if f["field"] == "c_integer")["type"] = "boolean"

    mysql = copy.deepcopy(env)
    mysql["payload"]["source"] = {
        "version": "3.5.0.Final", "connector": "mysql", "name": "x", "ts_ms": 1, "snapshot": "false", "db": "demo",
        "table": "all_types", "server_id": 1, "file": "mysql-bin.000003", "pos": 154, "row": 0,
    }  # fmt: skip
    assert row_field("c_smallint")["type"] == "int16" and row_field("c_timestamptz")["name"].endswith("ZonedTimestamp")
    big = "x" * (LIMIT + 1)
    kinds: list[tuple[str, Any, Any, list[tuple[str, bytes]], str]] = [
        # JSON shape
        ("invalid JSON", base_key, "this is not json", [], "invalid_json"),
        ("truncated JSON", base_key, text[: len(text) // 2], [], "invalid_json"),
        ("empty value", base_key, "", [], "invalid_json"),
        ("non-object JSON", base_key, "[1,2,3]", [], "not_an_object"),
        ("nested 20,000 deep", base_key, "[" * 20_000 + "]" * 20_000, [], "invalid_json"),
        ("trailing garbage", base_key, text + " trailing", [], "invalid_json"),
        (
            "non-UTF-8 bytes",
            base_key,
            text.replace('"c_text":"', '"c_text":"\udcff').encode("utf-8", "surrogateescape"),
            [],
            "invalid_utf8",
        ),  # noqa: E501
        # envelope structure
        ("missing schema", base_key, '{"payload":' + payload_text + "}", [], "missing_schema"),
        ("missing payload", base_key, '{"schema":' + schema_text + "}", [], "missing_payload"),
        ("extra payload", base_key, text[:-1] + ',"payload":' + payload_text + "}", [], "malformed_envelope"),
        ("extra wrapper field", base_key, text[:-1] + ',"extra":1}', [], "malformed_envelope"),
        ("missing op", base_key, mutated(setp("payload.op", _DELETE)), [], "missing_op"),
        ("unknown op", base_key, mutated(setp("payload.op", "x")), [], "unknown_op"),
        ("c without after", base_key, mutated(lambda e: e["payload"].update(op="c", after=None)), [], "missing_after"),
        ("u without after", base_key, mutated(lambda e: e["payload"].update(op="u", after=None)), [], "missing_after"),
        (
            "d without before",
            base_key,
            mutated(lambda e: e["payload"].update(op="d", after=None, before=None)),
            [],
            "missing_before",
        ),  # noqa: E501
        ("null key", None, text, [], "missing_key"),
        ("key not JSON", "{garbage", text, [], "invalid_key"),
        ("null key column", base_key, mutated(setp("payload.after.id", None)), [], "missing_key_value"),
        # values
        ("string for int32", base_key, mutated(setp("payload.after.c_integer", "abc")), [], "type_mismatch"),
        ("number for boolean", base_key, mutated(setp("payload.after.c_bool", 1)), [], "type_mismatch"),
        ("object for string", base_key, mutated(setp("payload.after.c_text", {"a": 1})), [], "type_mismatch"),
        ("string for array", base_key, mutated(setp("payload.after.c_int_array", "1,2")), [], "type_mismatch"),
        ("int16 out of range", base_key, mutated(setp("payload.after.c_smallint", 70000)), [], "unrepresentable_value"),  # noqa: E501
        ("int32 out of range", base_key, mutated(setp("payload.after.c_integer", 2**40)), [], "type_mismatch"),
        ("NaN literal", base_key, text.replace('"c_double":', '"c_double":NaN,"x_":', 1), [], "invalid_json"),
        ("Infinity for int64", base_key, mutated(setp("payload.after.c_bigint", "Infinity")), [], "type_mismatch"),
        ("bad base64", base_key, mutated(setp("payload.after.c_bytea", "!!not base64!!")), [], "unrepresentable_value"),  # noqa: E501
        (
            "decimal wider than its column",
            base_key,
            mutated(setp("payload.after.c_numeric", "f////////////////////w==")),
            [],
            "unrepresentable_value",
        ),  # noqa: E501
        (
            "unparsable timestamp",
            base_key,
            mutated(setp("payload.after.c_timestamptz", "yesterday")),
            [],
            "unrepresentable_value",
        ),  # noqa: E501
        (
            "timestamp out of range",
            base_key,
            mutated(setp("payload.after.c_timestamptz", "+294300-01-01T00:00:00Z")),
            [],
            "unrepresentable_value",
        ),  # noqa: E501
        ("unknown field", base_key, mutated(setp("payload.after.c_ghost", 1)), [], "unknown_field"),
        # schema
        ("schema contradicting payload", base_key, schema_edit(contradicting), [], "schema_mismatch"),
        ("unnamed schema field", base_key, schema_edit(unnamed), [], "invalid_schema"),
        ("duplicate schema field", base_key, schema_edit(duplicated), [], "invalid_schema"),
        # source block
        ("missing source", base_key, mutated(setp("payload.source", _DELETE)), [], "missing_source"),
        ("source not an object", base_key, mutated(setp("payload.source", "pg")), [], "invalid_source"),
        ("non-numeric lsn", base_key, mutated(setp("payload.source.lsn", "0/16B3748")), [], "invalid_position"),
        ("garbage sequence", base_key, mutated(setp("payload.source.sequence", '["a","b"]')), [], "invalid_position"),  # noqa: E501
        # routing
        ("another connector's envelope", base_key, _dumps(mysql), [], "unsupported_connector"),
        ("another table's envelope", base_key, mutated(setp("payload.source.table", "orders")), [], "foreign_envelope"),  # noqa: E501
        # size and headers
        ("oversized record", base_key, mutated(setp("payload.after.c_big_text", big)), [], "oversized_record"),
        ("bad Debezium header", base_key, text, [("__debezium.oldkey", b"{not json")], "invalid_header"),
    ]
    return kinds


_DELETE = object()


def _frame(spark: SparkSession, records: list[dict[str, Any]]) -> DataFrame:
    def raw(v: Any) -> bytes | None:
        return v.encode() if isinstance(v, str) else v

    rows = [
        (
            r["topic"],
            r["partition"],
            r["offset"],
            datetime.fromtimestamp(r["timestamp"] / 1000, UTC).replace(tzinfo=None),
            raw(r["key"]),
            raw(r["value"]),
            [(h["key"], raw(h["value"])) for h in r.get("headers") or []],
        )
        for r in records
    ]
    return spark.createDataFrame(rows, BINARY_RECORDS)


def _lake_rows(spark: SparkSession, prefix: str) -> list[tuple[Any, ...]]:
    frame = spark.table(f"lake.{prefix}.inventory.all_types")
    cols = [c for c in frame.columns if not c.startswith("_cdc_")]

    def comparable(v: Any) -> Any:
        return "NaN" if isinstance(v, float) and math.isnan(v) else v  # NaN != NaN

    return sorted((tuple(comparable(v) for v in r) for r in frame.select(*cols).collect()), key=repr)


def test_every_poison_kind_is_dead_lettered_and_no_good_row_changes(spark: SparkSession) -> None:
    reference, poisoned = (f"t{uuid.uuid4().hex[:8]}" for _ in range(2))
    clean = _capture(reference)
    records = _capture(poisoned)
    data_topic = f"{poisoned}.inventory.all_types"
    base = next(r for r in records if r["topic"] == data_topic and r["value"])
    kinds = poison_kinds(base["key"], base["value"])
    assert len(kinds) >= 30
    data_offsets = iter(r["offset"] + 1 for r in records if r["topic"] == data_topic)
    poison: list[dict[str, Any]] = []
    for kind, key, value, headers, _ in kinds:
        offset = next(data_offsets, None)
        if offset is None:  # more kinds than gaps between the capture's records: after its last one
            offset = max(r["offset"] for r in records + poison if r["topic"] == data_topic) + 1
        poison.append(
            {
                "topic": data_topic,
                "partition": 0,
                "offset": offset,
                "timestamp": base["timestamp"],
                "key": key,
                "value": value,
                "headers": [{"key": k, "value": v} for k, v in headers],
                "kind": kind,
            }
        )
    # a topic under the prefix that no connector writes: its records are unrecognised (see docs/reliability.md)
    stray = f"{poisoned}.inventory.stray"
    poison.append({"topic": stray, "partition": 0, "offset": 0, "timestamp": base["timestamp"], "key": None,
                   "value": '{"hello":"world"}', "headers": [], "kind": "unknown topic under the prefix"})  # fmt: skip
    expected = {
        (p["topic"], p["offset"]): reason
        for p, (*_, reason) in zip(poison, [*kinds, (None,) * 4 + ("unrecognised_record",)], strict=True)
    }  # noqa: E501

    run_batch(
        spark,
        SourceConfig(name=reference, topic_prefix=reference),
        FrameRecordSource(_frame(spark, clean), source_topic_patterns(reference)),
    )  # noqa: E501
    config = SourceConfig(name=poisoned, topic_prefix=poisoned, max_record_bytes=LIMIT)
    summary = run_batch(
        spark, config, FrameRecordSource(_frame(spark, records + poison), source_topic_patterns(poisoned))
    ).as_dict()

    # every kind is a dead letter with its reason, topic, partition, offset and raw record
    dead = {
        (r["topic"], r["offset"]): r
        for r in spark.table("lake.cdc_audit.dead_letters")
        .where(f"source = '{poisoned}'")
        .selectExpr("topic", "partition", "offset", "reason", "cast(key as binary) key", "cast(value as binary) value")
        .collect()
    }
    got = {coords: r["reason"] for coords, r in dead.items()}
    mismatched = {
        p["kind"]: (expected[(p["topic"], p["offset"])], got.get((p["topic"], p["offset"])))
        for p in poison
        if got.get((p["topic"], p["offset"])) != expected[(p["topic"], p["offset"])]
    }
    assert not mismatched, f"kind: (expected reason, dead-letter reason): {mismatched}"
    assert set(got) == set(expected), "only the poison records are dead letters"
    for p in poison:
        row = dead[(p["topic"], p["offset"])]
        assert row["partition"] == 0
        raw_value = p["value"].encode() if isinstance(p["value"], str) else p["value"]
        raw_key = p["key"].encode() if isinstance(p["key"], str) else p["key"]
        assert (_bytes(row["value"]), _bytes(row["key"])) == (raw_value, raw_key), p["kind"]

    # nothing lost: the counts reconcile, and the good rows are the reference lake's
    assert summary["dead_lettered"] == len(poison)
    assert sum(n for reasons in summary["dead_letters"].values() for n in reasons.values()) == len(poison)
    assert summary["checks"]["ok"], summary["checks"]
    got_rows, want_rows = _lake_rows(spark, poisoned), _lake_rows(spark, reference)
    assert len(got_rows) == len(want_rows)
    for got_row, want_row in zip(got_rows, want_rows, strict=True):
        assert got_row == want_row, [
            (i, g, w) for i, (g, w) in enumerate(zip(got_row, want_row, strict=True)) if g != w
        ]


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)
