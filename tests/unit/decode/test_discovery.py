"""Discovery: the schema fingerprint's fast path (known schema texts) gives the same value as the hash."""

from __future__ import annotations

import json

import pytest
from decode_helpers import record, topic_of, value
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdclake.decode import DecodeOptions, decode_records, records_from_dicts
from cdclake.decode.discovery import SAMPLE_EVERY, fingerprint, known_schemas
from cdclake.decode.layout import schema_text

pytestmark = pytest.mark.spark

V1 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "string"}]
V2 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "string"}, {"field": "b", "type": "int32"}]
V3 = [{"field": "id", "type": "int32"}, {"field": "a", "type": "int32"}]


def _compact(text: str) -> str:
    return json.dumps(json.loads(text), separators=(",", ":"))


def test_fingerprint_of_known_schemas_equals_the_hash_of_the_schema_text(spark: SparkSession) -> None:
    """Sampled and unsampled records, compact / spaced / other layouts, two topics: same fingerprints."""
    t1, t2 = topic_of("mysql"), topic_of("postgresql")
    odd = '{"payload": {"op": "c"}, "schema": {"type": "struct", "fields": []}}'  # schema after payload
    rows = [
        record(t1, 0, _compact(value("mysql", {"id": 1, "a": "x"}, row_fields=V1))),  # sampled: compact V1
        record(t1, 1, _compact(value("mysql", {"id": 2, "a": "y"}, row_fields=V1))),
        record(t1, 2, _compact(value("mysql", {"id": 3, "a": "z", "b": 1}, row_fields=V2))),  # unsampled V2
        record(t1, 3, value("mysql", {"id": 4, "a": "w"}, row_fields=V1)),  # spaced V1, never sampled
        record(t1, 4, odd),
        record(t1, 5, None),
        record(t2, SAMPLE_EVERY, value("postgresql", {"id": 1, "a": "x"}, row_fields=V1)),  # sampled: spaced
        record(t2, SAMPLE_EVERY + 1, value("postgresql", {"id": 2, "a": "y"}, row_fields=V1)),
        record(t2, SAMPLE_EVERY + 2, value("postgresql", {"id": 3, "a": 3}, row_fields=V3)),
    ]
    recs = records_from_dicts(spark, rows).withColumn("value", F.col("value").cast("string"))
    known = known_schemas(recs)
    assert sorted(known) == [t1, t2] and all(len(v) == 1 for v in known.values())
    got = recs.select(
        "offset",
        fingerprint(F.col("value"), known).alias("fast"),
        F.xxhash64(schema_text(F.col("value"))).alias("hash"),
    ).collect()
    assert [(r["offset"], r["fast"]) for r in got] == [(r["offset"], r["hash"]) for r in got]
    fingerprints = {r["offset"]: r["fast"] for r in got}
    assert len({fingerprints[0], fingerprints[1], fingerprints[2], fingerprints[3]}) == 3  # V1 (twice), V2, V1 spaced


def test_a_new_version_between_samples_is_still_cut(spark: SparkSession) -> None:
    """Only the old version is sampled; the incompatible one (never sampled) still cuts the topic."""
    topic = topic_of("mysql")
    rows = [record(topic, i, value("mysql", {"id": i, "a": f"v{i}"}, row_fields=V1)) for i in range(3)]
    rows += [record(topic, 3 + i, value("mysql", {"id": 3 + i, "a": i}, row_fields=V3)) for i in range(2)]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (frame,) = batch.tables.values()
    assert sorted(r["id"] for r in frame.collect()) == [0, 1, 2]
    assert batch.schema_cuts == {(topic, 0): 3} and batch.dead_letters.count() == 0


def test_the_decoder_skips_a_known_schema_and_reads_the_payload_whole(spark: SparkSession) -> None:
    """A record that starts with the sampled schema text is read from its payload on: the delimiter inside a
    value, non-ASCII text, a field after the payload, other layouts and key orders all decode the same."""
    topic = topic_of("mysql")
    fields = [
        {"field": "id", "type": "int32"},
        {"field": "payload", "type": "string"},
        {"field": "ü", "type": "string"},
    ]
    sampled = json.loads(value("mysql", {"id": 0, "payload": "p", "ü": "é"}, row_fields=fields))
    schema = json.dumps(sampled["schema"], separators=(",", ":"))
    prefix = '{"schema":' + schema + ',"payload":'

    def payload(i: int, text: str) -> str:
        body = json.loads(value("mysql", {"id": i, "payload": text, "ü": "é"}))
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    texts = [
        prefix + payload(0, "p") + "}",  # offset 0: sampled
        prefix + payload(1, 'x,"payload":1') + "}",  # the delimiter again, inside a value
        prefix + payload(2, "y") + ',"extra":{"a":[1]}}',  # a field after the payload: the full parse refuses it
        '{"schema": ' + schema + ', "payload": ' + payload(3, "z") + "}",  # a layout not sampled
        '{"payload":' + payload(4, "w") + ',"schema":' + schema + "}",  # another key order
        prefix + payload(5, "v") + "}  \n",  # trailing whitespace
        prefix + "null}",
        prefix + payload(7, "u") + "}}",  # one brace too many
    ]
    batch = decode_records(
        records_from_dicts(spark, [record(topic, i, t) for i, t in enumerate(texts)]), options=DecodeOptions()
    )
    (frame,) = batch.tables.values()
    assert sorted((r["id"], r["payload"], r["ü"]) for r in frame.collect()) == [
        (0, "p", "é"), (1, 'x,"payload":1', "é"), (3, "z", "é"), (4, "w", "é"), (5, "v", "é"),
    ]  # fmt: skip
    assert sorted((r["offset"], r["reason"]) for r in batch.dead_letters.collect()) == [
        (2, "malformed_envelope"),
        (6, "missing_payload"),
        (7, "invalid_json"),
    ]
