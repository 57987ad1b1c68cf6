"""Real-shape Debezium backlogs, generated from the project's own captures (``tests/fixtures/captures``).

The schemas, source blocks, transaction blocks, BEGIN/END records and headers are taken from a record that the
local stack's PostgreSQL or MariaDB connector really sent (``*_all_types_schemas.jsonl``, Debezium 3.5,
JsonConverter, ``provide.transaction.metadata=true``); the table is ten of its columns (:data:`COLUMNS`: an int
key, bigint, text, varchar, a decimal, a zoned and a local timestamp, a date, a boolean and a JSON document), with
each column's Connect schema exactly as the connector sent it. Values, keys, positions and transaction ids are
generated; the layout (field order, compact JSON, nulls) is the connector's:

* PostgreSQL (``REPLICA IDENTITY DEFAULT``): an update has no before-image, a delete's has the key only;
* MariaDB: full before-images;
* every delete is followed by its tombstone (a null value), as ``tombstones.on.delete`` does by default;
* schemas off: the key and value are the payloads alone, as ``schemas.enable=false`` writes them.

The workload (:class:`Workload`): transactions of 1-5 events (uniform), each between its BEGIN and END records
on ``<prefix>.transaction`` (END with its event count per table); 70% inserts of new keys, 25% updates and 5%
deletes of live keys, the keys of updates and deletes drawn from the newest ``hot`` share of the live keys (25%
by default). :attr:`Workload.live` is the table's final content's keys, to check a lake against.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "captures"
KINDS = ("postgres", "mariadb")
#: The captured table's columns kept, per connector (the key first).
COLUMNS = {
    "postgres": (
        "id", "c_bigint", "c_text", "c_varchar", "c_numeric", "c_timestamptz", "c_timestamp", "c_date", "c_bool",
        "c_jsonb",
    ),
    "mariadb": (
        "id", "c_bigint", "c_text", "c_varchar", "c_decimal", "c_timestamp", "c_datetime", "c_date", "c_bool",
        "c_json",
    ),
}  # fmt: skip
#: The local-timestamp column: it holds :func:`local_us` of the event that wrote the row, so a lake's row shows
#: which event it holds.
VERSION_COLUMN = {"postgres": "c_timestamp", "mariadb": "c_datetime"}
CAPTURE_FILE = {"postgres": "pg_all_types_schemas.jsonl", "mariadb": "mariadb_all_types_schemas.jsonl"}
#: The database (MariaDB) or schema (PostgreSQL) of the generated table, and its name.
NAMESPACE = {"postgres": "inventory", "mariadb": "demo"}
TABLE = "items"
_COMPACT = {"separators": (",", ":"), "ensure_ascii": False}
_WORDS = ("alpha", "bravo", "delta", "gamma", "kilo", "lima", "oscar", "sierra", "tango", "zulu")
_TS0_US = 1_795_000_000_000_000  # 2026-11-17, microseconds


def _dumps(value: Any) -> str:
    return json.dumps(value, **_COMPACT)


def local_us(n: int) -> int:
    """The value (epoch microseconds) of :data:`VERSION_COLUMN` in the row written by event ``n``."""
    return _TS0_US + n * 1_000_003


@dataclass(frozen=True)
class Template:
    """What one connector's captured record gives a generated one."""

    kind: str
    value_schema: dict[str, Any]
    key_schema: dict[str, Any]
    source: dict[str, Any]
    tx_key_schema: dict[str, Any]
    tx_value_schema: dict[str, Any]
    headers: tuple[tuple[str, str], ...]
    row_schema: dict[str, Any]
    decimal_scale: int

    @classmethod
    def load(cls, kind: str, prefix: str) -> Template:
        """The template of ``kind`` (``postgres`` or ``mariadb``) renamed to topic prefix ``prefix``."""
        records = [json.loads(line) for line in (CAPTURES / CAPTURE_FILE[kind]).read_text().splitlines() if line]
        data = next(r for r in records if r["value"] and '"op":"u"' in r["value"])
        tx = next(r for r in records if r["topic"].endswith(".transaction") and r["value"])
        value, key = json.loads(data["value"]), json.loads(data["key"])
        keep = COLUMNS[kind]
        namespace = f"{prefix}.{NAMESPACE[kind]}.{TABLE}"
        schema = copy.deepcopy(value["schema"])
        schema["name"] = f"{namespace}.Envelope"
        row_schema: dict[str, Any] = {}
        for part in schema["fields"]:
            if part["field"] in ("before", "after"):
                by_name = {f["field"]: f for f in part["fields"]}
                part["fields"] = [by_name[c] for c in keep]
                part["name"] = f"{namespace}.Value"
                row_schema = part
        key_schema = copy.deepcopy(key["schema"])
        key_schema["name"] = f"{namespace}.Key"
        if key_schema["fields"][0]["field"] != keep[0]:
            raise ValueError(f"{CAPTURE_FILE[kind]}: the key is not {keep[0]}")
        source = dict(value["payload"]["source"], name=prefix, db="demo", table=TABLE, snapshot="false")
        decimal = next(f for f in row_schema["fields"] if f.get("name") == "org.apache.kafka.connect.data.Decimal")
        headers = tuple(
            (h["key"], prefix if h["key"].endswith("LogicalName") else h["value"]) for h in data["headers"] or ()
        )
        return cls(
            kind=kind,
            value_schema=schema,
            key_schema=key_schema,
            source=source,
            tx_key_schema=json.loads(tx["key"])["schema"],
            tx_value_schema=json.loads(tx["value"])["schema"],
            headers=headers,
            row_schema=row_schema,
            decimal_scale=int(decimal["parameters"]["scale"]),
        )

    def schema_file(self) -> dict[str, Any]:
        """The ``--schema-source`` file of a schemas-off backlog (the table's Connect schema as sent)."""
        table = f"{NAMESPACE[self.kind]}.{TABLE}"
        return {"tables": {table: self.row_schema}, "keys": {table: [COLUMNS[self.kind][0]]}}


def _decimal(unscaled: int) -> str:
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")


@dataclass
class Workload:
    """A backlog's events, generated in order (see the module's docstring)."""

    kind: str
    prefix: str
    events: int
    schemas: bool = True
    hot: float = 0.25
    seed: int = 1
    live: dict[int, int] = field(default_factory=dict)  # key -> the event number of its last write
    counts: dict[str, int] = field(default_factory=lambda: {"c": 0, "u": 0, "d": 0, "tx": 0})

    def __post_init__(self) -> None:
        self.template = Template.load(self.kind, self.prefix)
        self.topic = f"{self.prefix}.{NAMESPACE[self.kind]}.{TABLE}"
        self.tx_topic = f"{self.prefix}.transaction"
        self.data_collection = f"{NAMESPACE[self.kind]}.{TABLE}"
        self._schema_text = _dumps(self.template.value_schema)
        self._key_schema_text = _dumps(self.template.key_schema)
        self._tx_key_schema_text = _dumps(self.template.tx_key_schema)
        self._tx_value_schema_text = _dumps(self.template.tx_value_schema)

    def _row(self, key: int, n: int, rng: random.Random) -> dict[str, Any]:
        ts = local_us(n)
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(4, 12)))
        doc = {"sku": f"S{key % 9973:05d}", "tags": [rng.choice(_WORDS), rng.choice(_WORDS)], "qty": n % 97}
        values = [
            key,
            rng.randrange(-(2**62), 2**62),
            words,
            f"V{key:08d}",
            _decimal(rng.randrange(-(10**9), 10**9)),
            f"2026-11-{17 + (n // 86_400_000) % 10:02d}T{(n // 3_600_000) % 24:02d}:{(n // 60_000) % 60:02d}:"
            f"{(n // 1000) % 60:02d}.{ts % 1_000_000:06d}Z",
            ts,
            20_409 + n % 365,
            rng.random() < 0.5 if self.kind == "postgres" else int(rng.random() < 0.5),
            _dumps(doc),
        ]
        return dict(zip(COLUMNS[self.kind], values, strict=True))

    def _position(self, source: dict[str, Any], n: int, tx_no: int, row: int) -> None:
        ts_us = _TS0_US + n * 1_000
        source.update(ts_ms=ts_us // 1000, ts_us=ts_us, ts_ns=ts_us * 1000)
        if self.kind == "postgres":
            lsn = 40_000_000 + n * 120
            source.update(txId=10_000 + tx_no, lsn=lsn, sequence=_dumps([str(lsn - 120), str(lsn)]))
        else:
            source.update(gtid=self._tx_id(tx_no), file="mariadb-bin.000007", pos=4 + tx_no * 900, row=row)

    def _tx_id(self, tx_no: int) -> str:
        if self.kind == "postgres":
            return f"{10_000 + tx_no}:{40_000_000 + tx_no * 600}"
        return f"0-184054-{1_000 + tx_no}"

    def _record(self, key_payload: Any, value_payload: Any, topic: str, key_schema: str, value_schema: str) -> tuple:
        if self.schemas:
            key = f'{{"schema":{key_schema},"payload":{_dumps(key_payload)}}}'
            value = None if value_payload is None else f'{{"schema":{value_schema},"payload":{_dumps(value_payload)}}}'
        else:
            key = _dumps(key_payload)
            value = None if value_payload is None else _dumps(value_payload)
        return topic, key, value

    def _tx_record(self, tx_no: int, status: str, count: int | None, n: int) -> tuple:
        payload = {
            "status": status,
            "id": self._tx_id(tx_no),
            "event_count": count,
            "data_collections": None
            if count is None
            else [{"data_collection": self.data_collection, "event_count": count}],
            "ts_ms": (_TS0_US + n * 1_000) // 1000,
        }
        return self._record(
            {"id": self._tx_id(tx_no)}, payload, self.tx_topic, self._tx_key_schema_text, self._tx_value_schema_text
        )

    def records(self, chunk: int = 20_000) -> Iterator[list[tuple[str, str, str | None]]]:
        """The backlog's records in order, ``(topic, key, value)`` in chunks of about ``chunk``."""
        rng = random.Random(self.seed)
        keys: list[int] = []  # every key inserted, oldest first (a deleted one is drawn again)
        next_key, n, tx_no, out = 1, 0, 0, []
        key_schema = self._key_schema_text
        while n < self.events:
            size = min(rng.randint(1, 5), self.events - n)
            tx_no += 1
            self.counts["tx"] += 1
            out.append(self._tx_record(tx_no, "BEGIN", None, n))
            for order in range(1, size + 1):
                draw = rng.random()
                live = len(self.live)
                if draw < 0.70 or live < 10:
                    op, key = "c", next_key
                    next_key += 1
                    keys.append(key)
                else:
                    op = "u" if draw < 0.95 else "d"
                    while True:  # a live key among the newest `hot` share
                        span = max(1, int(len(keys) * self.hot))
                        key = keys[len(keys) - 1 - rng.randrange(span)]
                        if key in self.live:
                            break
                source = dict(self.template.source)
                self._position(source, n, tx_no, order - 1)
                before = after = None
                if op in ("c", "u"):
                    after = self._row(key, n, rng)
                if self.kind == "mariadb" and op in ("u", "d"):
                    before = self._row(key, self.live[key], random.Random(key * 7919 + self.live[key]))
                elif op == "d":
                    before = dict.fromkeys(COLUMNS[self.kind]) | {COLUMNS[self.kind][0]: key}
                payload = {
                    "before": before,
                    "after": after,
                    "source": source,
                    "transaction": {"id": self._tx_id(tx_no), "total_order": order, "data_collection_order": order},
                    "op": op,
                    "ts_ms": source["ts_ms"] + 3,
                    "ts_us": source["ts_us"] + 3000,
                    "ts_ns": source["ts_ns"] + 3_000_000,
                }
                out.append(self._record({"id": key}, payload, self.topic, key_schema, self._schema_text))
                if op == "d":
                    del self.live[key]
                    out.append(self._record({"id": key}, None, self.topic, key_schema, self._schema_text))
                else:
                    self.live[key] = n
                self.counts[op] += 1
                n += 1
            out.append(self._tx_record(tx_no, "END", size, n))
            if len(out) >= chunk:
                yield out
                out = []
        if out:
            yield out

    def last_writes(self) -> dict[int, int]:
        """The table's final content: each live key and its row's :data:`VERSION_COLUMN` value."""
        return {key: local_us(n) for key, n in self.live.items()}

    @property
    def data_events(self) -> int:
        """Change events on the table's topic (tombstones and transaction records not counted)."""
        return self.counts["c"] + self.counts["u"] + self.counts["d"]

    def spec(self, schema_file: Path | None = None, mode: str = "upsert") -> dict[str, Any]:
        """A connector spec of the backlog (written as YAML for ``cdclake ingest --spec``), the table in ``mode``."""
        base = "mariadb" if self.kind == "mariadb" else "postgres"
        spec: dict[str, Any] = {
            "name": self.prefix,
            "connector": "mariadb" if self.kind == "mariadb" else "postgresql",
            "connection_id": f"cdc_{base}",
            "capture_user": "debezium",
            "capture_password": f"${{env:CDC_{base.upper()}_DEBEZIUM_PASSWORD}}",
            "topic_prefix": self.prefix,
            "database": "demo",
            "tables": [{"name": self.data_collection, "lake": {"mode": mode}}],
            "signal_table": f"{NAMESPACE[self.kind]}.debezium_signal",
            "transaction_metadata": True,
            "converters": {"key_schemas_enable": self.schemas, "value_schemas_enable": self.schemas},
        }
        if self.kind == "postgres":
            spec["schema"] = NAMESPACE["postgres"]
        if not self.schemas:
            spec["converters"]["schema_source"] = str(schema_file)
        return spec
