"""MongoDB: updates without a full document are merged into the stored document, in position order.

No MongoDB server runs here: the records are hand-built in the real connector's format (change streams,
JsonConverter with schemas off), following shared/reference/digests/mysql-and-mongodb-change-events.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.config import SourceConfig
from cdclake.ingest.mongo import apply_patch, fold_events

from .conftest import RunBatch
from .events import kafka_now_ms

pytestmark = pytest.mark.spark


class Mongo:
    def __init__(self, prefix: str) -> None:
        self.prefix, self.offset, self.records = prefix, 0, []

    def emit(
        self,
        key: str,
        op: str,
        after: dict | None,
        ts: int,
        ord_: int = 1,
        updated: dict | None = None,
        removed: list[str] | None = None,
        truncated: list[dict] | None = None,
    ) -> None:
        value: dict[str, Any] = {
            "before": None,
            "after": None if after is None else json.dumps(after),
            "updateDescription": None
            if op != "u" or after is not None
            else {
                "updatedFields": json.dumps(updated or {}),
                "removedFields": removed or [],
                "truncatedArrays": truncated or [],
            },
            "source": {
                "version": "3.5.0.Final",
                "connector": "mongodb",
                "name": self.prefix,
                "ts_ms": ts * 1000,
                "snapshot": "false",
                "db": "demo",
                "rs": "rs0",
                "collection": "customers",
                "ord": ord_,
            },
            "op": op,
            "ts_ms": ts * 1000,
        }
        self.records.append(
            {
                "topic": f"{self.prefix}.demo.customers",
                "partition": 0,
                "offset": self.offset,
                "timestamp": kafka_now_ms(),
                "key": json.dumps({"id": key}),
                "value": json.dumps(value),
                "headers": [],
            }
        )
        self.offset += 1

    def take(self) -> list[dict]:
        out, self.records = self.records, []
        return out


def test_apply_patch_sets_unsets_and_truncates_dotted_paths() -> None:
    doc = json.dumps({"name": "A", "address": {"city": "X", "zip": "1"}, "tags": ["a", "b", "c"], "n": 1})
    out = json.loads(
        apply_patch(
            doc, json.dumps({"address.city": "Y", "tags.1": "B", "new.deep": 5}), ["n"], [{"field": "tags", "size": 2}]
        )
    )
    assert out == {"name": "A", "address": {"city": "Y", "zip": "1"}, "tags": ["a", "B"], "new": {"deep": 5}}
    assert fold_events(
        None,
        [
            {"op": "c", "document": '{"a":1}', "updated": None, "removed": None, "truncated": None},
            {"op": "u", "document": None, "updated": '{"b":2}', "removed": ["a"], "truncated": None},
        ],
    ) == ("u", '{"b":2}')


def test_partial_updates_merge_into_the_stored_document(spark: SparkSession, prefix: str, ingest: RunBatch) -> None:
    source = SourceConfig(name=prefix, topic_prefix=prefix, key_schemas=False, value_schemas=False)
    m = Mongo(prefix)
    m.emit(
        '{"$oid":"1"}', "c", {"_id": {"$oid": "1"}, "name": "Anne", "address": {"city": "Oslo"}, "visits": 1}, ts=100
    )
    m.emit('{"$oid":"2"}', "c", {"_id": {"$oid": "2"}, "name": "Bob"}, ts=101)
    ingest(m.take(), source=source)
    # next batch: two partial updates of 1 (folded in order), a partial update then a delete of 2
    m.emit('{"$oid":"1"}', "u", None, ts=200, updated={"address.city": "Bergen", "visits": 2})
    m.emit('{"$oid":"1"}', "u", None, ts=201, updated={"email": "a@x"}, removed=["visits"])
    m.emit('{"$oid":"2"}', "u", None, ts=202, updated={"name": "Robert"})
    m.emit('{"$oid":"2"}', "d", None, ts=203)
    ingest(m.take(), source=source)
    got = {
        r["id"]: json.loads(r["document"])
        for r in spark.sql(f"SELECT id, document FROM lake.{prefix}.demo.customers").collect()
    }
    assert got == {
        '{"$oid":"1"}': {"_id": {"$oid": "1"}, "name": "Anne", "address": {"city": "Bergen"}, "email": "a@x"}
    }
