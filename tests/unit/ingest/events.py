"""Hand-built Debezium PostgreSQL envelopes (JsonConverter, schemas on), shaped like the real ones in
tests/fixtures/captures, for driving the ingestion job through the real decoder."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

SOURCE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "field": "snapshot"},
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
    ],
}
TX_SCHEMA = {
    "type": "struct",
    "optional": True,
    "name": "event.block",
    "field": "transaction",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
}
TYPES = {"int64": {"type": "int64"}, "int32": {"type": "int32"}, "string": {"type": "string"}}
UNAVAILABLE = "__debezium_unavailable_value"
#: Kafka timestamps are "now" when a record is produced: transaction age limits measure from them
KAFKA_TS0 = int(time.time() * 1000)


def kafka_now_ms() -> int:
    """The Kafka timestamp of a record produced now (epoch ms)."""
    return int(time.time() * 1000)


@dataclass
class PgTable:
    """Produces the Kafka records of one captured PostgreSQL table (one partition)."""

    prefix: str
    table: str
    columns: dict[str, str] = field(default_factory=lambda: {"id": "int64", "name": "string", "qty": "int32"})
    key: tuple[str, ...] = ("id",)
    schema: str = "inventory"
    partition: int = 0
    offset: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return f"{self.prefix}.{self.schema}.{self.table}"

    def _fields(self) -> list[dict[str, Any]]:
        return [{**TYPES[t], "optional": c not in self.key, "field": c} for c, t in self.columns.items()]

    def _key(self, row: dict[str, Any]) -> str:
        schema = {
            "type": "struct",
            "optional": False,
            "name": f"{self.topic}.Key",
            "fields": [f for f in self._fields() if f["field"] in self.key],
        }
        return json.dumps({"schema": schema, "payload": {k: row[k] for k in self.key}})

    def _value(
        self,
        op: str,
        before: dict | None,
        after: dict | None,
        lsn: int,
        commit_lsn: int | None,
        snapshot: str | None,
        tx: str | None,
    ) -> str:
        row_schema = {"type": "struct", "optional": True, "name": f"{self.topic}.Value", "fields": self._fields()}
        schema = {
            "type": "struct",
            "optional": False,
            "name": f"{self.topic}.Envelope",
            "fields": [
                {**row_schema, "field": "before"},
                {**row_schema, "field": "after"},
                SOURCE_SCHEMA,
                TX_SCHEMA,
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
            ],
        }
        source = {
            "version": "3.5.0.Final",
            "connector": "postgresql",
            "name": self.prefix,
            "ts_ms": 1_700_000_000_000 + lsn,
            "snapshot": snapshot or "false",
            "db": "demo",
            "sequence": json.dumps([None if commit_lsn is None else str(commit_lsn), str(lsn)]),
            "schema": self.schema,
            "table": self.table,
            "txId": 1000 + lsn,
            "lsn": lsn,
        }
        payload = {
            "before": before,
            "after": after,
            "source": source,
            "transaction": None if tx is None else tx.block(f"{self.schema}.{self.table}", lsn),
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
        return json.dumps({"schema": schema, "payload": payload})

    def _emit(self, key: str | None, value: str | None, headers: list[dict[str, str]] | None = None) -> dict[str, Any]:
        rec = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp": kafka_now_ms(),
            "key": key,
            "value": value,
            "headers": headers or [],
        }
        self.offset += 1
        self.records.append(rec)
        return rec

    def full(self, row: dict[str, Any]) -> dict[str, Any]:
        return {c: row.get(c) for c in self.columns}

    tx: Transaction | None = None

    def create(self, row: dict[str, Any], lsn: int, commit: int | None = None) -> None:
        self._emit(self._key(row), self._value("c", None, self.full(row), lsn, commit or lsn, None, self._tx()))

    def _tx(self) -> Transaction | None:
        return self.tx

    def read(self, row: dict[str, Any], lsn: int, snapshot: str = "true") -> None:
        self._emit(self._key(row), self._value("r", None, self.full(row), lsn, None, snapshot, None))

    def update(
        self, row: dict[str, Any], lsn: int, before: dict[str, Any] | None = None, commit: int | None = None
    ) -> None:
        self._emit(self._key(row), self._value("u", before, self.full(row), lsn, commit or lsn, None, self._tx()))

    def delete(self, row: dict[str, Any], lsn: int, tombstone: bool = True, commit: int | None = None) -> None:
        key = self._key(row)
        self._emit(
            key,
            self._value(
                "d",
                {k: row.get(k) for k in self.key} | {c: None for c in self.columns if c not in self.key},
                None,
                lsn,
                commit or lsn,
                None,
                None,
            ),
        )
        if tombstone:
            self._emit(key, None)

    def move_key(self, old: dict[str, Any], new: dict[str, Any], lsn: int) -> None:
        """A primary-key UPDATE: delete (header newkey), tombstone, create (header oldkey), one LSN."""
        old_key, new_key = self._key(old), self._key(new)
        self._emit(
            old_key,
            self._value("d", self.full(old), None, lsn, lsn, None, None),
            [{"key": "__debezium.newkey", "value": new_key}],
        )
        self._emit(old_key, None, [{"key": "__debezium.newkey", "value": new_key}])
        self._emit(
            new_key,
            self._value("c", None, self.full(new), lsn, lsn, None, None),
            [{"key": "__debezium.oldkey", "value": old_key}],
        )

    def truncate(self, lsn: int) -> None:
        self._emit(None, self._value("t", None, None, lsn, lsn, None, None))

    def take(self) -> list[dict[str, Any]]:
        """The records produced since the last take (one batch's worth)."""
        out, self.records = self.records, []
        return out


@dataclass
class Transaction:
    """A PostgreSQL transaction: BEGIN/END records on ``<prefix>.transaction`` and the blocks of its events.

    Use: ``tx = Transaction(log, 900)``; ``tx.begin(lsn)``; set ``table.tx = tx`` while emitting its
    events; ``tx.end(lsn)`` writes END with the per-collection counts of the events emitted.
    """

    log: TxLog
    txid: int
    total: int = 0
    per_collection: dict[str, int] = field(default_factory=dict)

    def block(self, collection: str, lsn: int) -> dict[str, Any]:
        self.total += 1
        self.per_collection[collection] = self.per_collection.get(collection, 0) + 1
        return {
            "id": f"{self.txid}:{lsn}",
            "total_order": self.total,
            "data_collection_order": self.per_collection[collection],
        }

    def begin(self, lsn: int) -> None:
        self.log.emit(
            {
                "status": "BEGIN",
                "id": f"{self.txid}:{lsn}",
                "event_count": None,
                "data_collections": None,
                "ts_ms": 1_700_000_000_000 + lsn,
            }
        )

    def end(self, lsn: int, counts: dict[str, int] | None = None) -> None:
        counts = counts if counts is not None else self.per_collection
        self.log.emit(
            {
                "status": "END",
                "id": f"{self.txid}:{lsn}",
                "event_count": sum(counts.values()),
                "data_collections": [{"data_collection": k, "event_count": v} for k, v in sorted(counts.items())],
                "ts_ms": 1_700_000_000_000 + lsn,
            }
        )


@dataclass
class TxLog:
    """The ``<prefix>.transaction`` topic (schemas on, like the real JsonConverter output)."""

    prefix: str
    offset: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)

    def emit(self, payload: dict[str, Any]) -> None:
        schema = {
            "type": "struct",
            "optional": False,
            "name": "io.debezium.connector.common.TransactionMetadataValue",
            "fields": [
                {"type": "string", "optional": False, "field": "status"},
                {"type": "string", "optional": False, "field": "id"},
                {"type": "int64", "optional": True, "field": "event_count"},
                {
                    "type": "array",
                    "optional": True,
                    "field": "data_collections",
                    "items": {
                        "type": "struct",
                        "optional": False,
                        "name": "event.collection",
                        "fields": [
                            {"type": "string", "optional": False, "field": "data_collection"},
                            {"type": "int64", "optional": False, "field": "event_count"},
                        ],
                    },
                },
                {"type": "int64", "optional": False, "field": "ts_ms"},
            ],
        }
        key = json.dumps(
            {
                "schema": {
                    "type": "struct",
                    "optional": False,
                    "name": "io.debezium.connector.common.TransactionMetadataKey",
                    "fields": [{"type": "string", "optional": False, "field": "id"}],
                },
                "payload": {"id": payload["id"]},
            }
        )
        self.records.append(
            {
                "topic": f"{self.prefix}.transaction",
                "partition": 0,
                "offset": self.offset,
                "timestamp": kafka_now_ms(),
                "key": key,
                "value": json.dumps({"schema": schema, "payload": payload}),
                "headers": [],
            }
        )
        self.offset += 1

    def take(self) -> list[dict[str, Any]]:
        out, self.records = self.records, []
        return out
