"""Hand-built Debezium PostgreSQL envelopes (JsonConverter, schemas on), shaped like the real ones in
tests/fixtures/captures, for driving the ingestion job through the real decoder."""

from __future__ import annotations

import json
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
            "transaction": None if tx is None else {"id": f"{tx}:{lsn}", "total_order": 1, "data_collection_order": 1},
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
        }
        return json.dumps({"schema": schema, "payload": payload})

    def _emit(self, key: str | None, value: str | None, headers: list[dict[str, str]] | None = None) -> dict[str, Any]:
        rec = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "timestamp": 1_700_000_000_000 + self.offset,
            "key": key,
            "value": value,
            "headers": headers or [],
        }
        self.offset += 1
        self.records.append(rec)
        return rec

    def full(self, row: dict[str, Any]) -> dict[str, Any]:
        return {c: row.get(c) for c in self.columns}

    def create(self, row: dict[str, Any], lsn: int, commit: int | None = None) -> None:
        self._emit(self._key(row), self._value("c", None, self.full(row), lsn, commit or lsn, None, None))

    def read(self, row: dict[str, Any], lsn: int, snapshot: str = "true") -> None:
        self._emit(self._key(row), self._value("r", None, self.full(row), lsn, None, snapshot, None))

    def update(
        self, row: dict[str, Any], lsn: int, before: dict[str, Any] | None = None, commit: int | None = None
    ) -> None:
        self._emit(self._key(row), self._value("u", before, self.full(row), lsn, commit or lsn, None, None))

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
