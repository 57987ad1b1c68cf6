"""Batch state of a source in the lake (``lake.cdc_audit.batches``): the exactly-once ledger.

Every batch writes two rows: ``planned`` (its exact offset ranges, before any table is touched) and
``committed`` (after every table has been applied, with the batch summary). The next batch starts
at the ``next_offsets`` of the last committed row; a ``planned`` row without its ``committed`` row
is a batch interrupted by a crash, and the next run redoes exactly those ranges.

Besides the summary JSON (kept for compatibility), the ``committed`` row carries typed columns
(:data:`BATCH_COLUMNS`): records and dead letters, the offset range of every topic-partition, per
table and op the events decoded / held (incomplete transactions) / applied / skipped (stale) /
quarantined / dead-lettered, transaction counts and seconds per phase. A ledger created before they
existed gets them on first use (:func:`add_missing_columns`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.ingest.naming import AUDIT_NAMESPACE, audit_table
from cdclake.ingest.plan import OffsetRange, TopicPartition, ranges_from_json, ranges_to_json
from cdclake.lake.catalog import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BATCHES = "batches"
PLANNED = "planned"
COMMITTED = "committed"

#: One topic-partition of a batch: ``[start_offset, end_offset)`` read, ``next_offset`` where the next
#: batch starts (before ``end_offset`` when incomplete transactions were held), records dead-lettered.
OFFSET_RANGE_TYPE = (
    "STRUCT<topic: STRING, `partition`: INT, start_offset: BIGINT, end_offset: BIGINT, next_offset: BIGINT, "
    "dead_lettered: BIGINT>"
)
#: One table and op of a batch (``op`` is null on the row counting the table's undecodable records).
TABLE_COUNT_TYPE = (
    "STRUCT<`table`: STRING, op: STRING, decoded: BIGINT, held: BIGINT, applied: BIGINT, skipped: BIGINT, "
    "quarantined: BIGINT, dead_lettered: BIGINT>"
)
#: Typed columns after ``summary``, in this order (also the order :func:`add_missing_columns` adds them).
BATCH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("records", "BIGINT"),
    ("dead_lettered", "BIGINT"),
    ("offset_ranges", f"ARRAY<{OFFSET_RANGE_TYPE}>"),
    ("table_counts", f"ARRAY<{TABLE_COUNT_TYPE}>"),
    ("tx_complete", "BIGINT"),
    ("tx_held", "BIGINT"),
    ("tx_mismatched", "BIGINT"),
    ("tx_expired", "BIGINT"),
    ("phase_seconds", "MAP<STRING, DOUBLE>"),
)

BATCHES_DDL = (
    """CREATE TABLE IF NOT EXISTS {name} (
  source STRING NOT NULL,
  batch_id STRING NOT NULL,
  seq BIGINT NOT NULL,
  status STRING NOT NULL,
  ranges STRING,
  next_offsets STRING,
  recorded_at TIMESTAMP,
  summary STRING,
  """
    + ",\n  ".join(f"{n} {t}" for n, t in BATCH_COLUMNS)
    + f"""
) USING iceberg TBLPROPERTIES ('format-version'='2', 'comment'='cdclake batch ledger ({PLANNED}/{COMMITTED} rows)')"""
)


@dataclass(frozen=True)
class BatchRecord:
    """One row of the ledger."""

    source: str
    batch_id: str
    seq: int
    status: str
    ranges: list[OffsetRange]
    next_offsets: dict[TopicPartition, int]
    recorded_at: datetime | None = None


def _offsets_to_json(offsets: dict[TopicPartition, int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), value in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = value
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _offsets_from_json(text: str | None) -> dict[TopicPartition, int]:
    if not text:
        return {}
    return {(t, int(p)): int(v) for t, parts in json.loads(text).items() for p, v in parts.items()}


def add_missing_columns(spark: SparkSession, table: str, columns: Sequence[tuple[str, str]]) -> list[str]:
    """Add the ``(name, Spark SQL type)`` columns ``table`` lacks (audit tables of older lakes); returns their names."""
    present = {f.name for f in spark.table(table).schema.fields}
    missing = [(n, t) for n, t in columns if n not in present]
    if missing:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(f'`{n}` {t}' for n, t in missing)})")
    return [n for n, _ in missing]


def table_count_rows(tables: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``table_counts`` rows from the summary's per-table results (pure).

    Per table and op: ``decoded`` (events decoded in the batch, released quarantined records included),
    ``held`` (decoded but left for the next batch: incomplete transactions), ``applied``, ``skipped``
    (stale), ``quarantined``; plus, when the table had undecodable records, a row with ``op`` null
    and ``dead_lettered``. For upsert tables ``decoded - held`` can exceed ``applied + skipped``: only
    the latest event of a key in the batch is merged.
    """
    rows: list[dict[str, Any]] = []
    for table, result in sorted(tables.items()):
        decoded = result.get("decoded") or {}
        events = result.get("events") or {}
        applied = result.get("applied_by_op") or {}
        skipped = result.get("skipped_by_op") or {}
        quarantined = events if result.get("quarantined") else {}
        for op in sorted(set(decoded) | set(events) | set(applied) | set(skipped)):
            seen = int(decoded.get(op, events.get(op, 0)))
            rows.append(
                {
                    "table": table,
                    "op": op,
                    "decoded": seen,
                    "held": max(0, seen - int(events.get(op, 0))),
                    "applied": int(applied.get(op, 0)),
                    "skipped": int(skipped.get(op, 0)),
                    "quarantined": int(quarantined.get(op, 0)),
                    "dead_lettered": 0,
                }
            )
        if result.get("dead_lettered"):
            rows.append(
                {
                    "table": table,
                    "op": None,
                    "decoded": 0,
                    "held": 0,
                    "applied": 0,
                    "skipped": 0,
                    "quarantined": 0,
                    "dead_lettered": int(result["dead_lettered"]),
                }
            )
    return rows


def batch_columns(rec: BatchRecord, summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """Values of the typed :data:`BATCH_COLUMNS` of one ledger row (pure).

    A ``planned`` row (no summary) has only ``offset_ranges`` (without dead letters).
    """
    dead = (summary or {}).get("dead_lettered_by_partition") or {}
    offset_ranges = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "start_offset": r.start,
            "end_offset": r.end,
            "next_offset": rec.next_offsets.get((r.topic, r.partition), r.end),
            "dead_lettered": None if summary is None else int(dead.get(f"{r.topic}/{r.partition}", 0)),
        }
        for r in sorted(rec.ranges)
    ]
    if summary is None:
        return {name: None for name, _ in BATCH_COLUMNS} | {"offset_ranges": offset_ranges}
    tx = (summary.get("transactions") or {}).get("counts") or {}
    return {
        "records": int(summary.get("records") or 0),
        "dead_lettered": int(summary.get("dead_lettered") or 0),
        "offset_ranges": offset_ranges,
        "table_counts": table_count_rows(summary.get("tables") or {}),
        "tx_complete": int(tx.get("complete", 0)),
        "tx_held": int(tx.get("held", 0)),
        "tx_mismatched": int(tx.get("mismatched", 0)),
        "tx_expired": int(tx.get("expired", 0)),
        "phase_seconds": {k: float(v) for k, v in (summary.get("phases_s") or {}).items()},
    }


class BatchLedger:
    """Reads and appends the ledger rows of one source."""

    def __init__(self, spark: SparkSession, source: str) -> None:
        self.spark = spark
        self.source = source
        self.name = audit_table(BATCHES)

    _ensured: set[tuple[str, str]] = set()

    def ensure(self) -> None:
        """Create the audit namespace and the ledger table (or add the typed columns an older ledger lacks),
        once per Spark application."""
        marker = (self.spark.sparkContext.applicationId, self.name)
        if marker in BatchLedger._ensured:
            return
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{AUDIT_NAMESPACE}")
        self.spark.sql(BATCHES_DDL.format(name=self.name))
        add_missing_columns(self.spark, self.name, BATCH_COLUMNS)
        BatchLedger._ensured.add(marker)

    def last(self) -> tuple[BatchRecord | None, BatchRecord | None]:
        """(last committed batch, interrupted batch to redo or None)."""
        rows = (
            self.spark.table(self.name).where(f"source = '{self.source.replace(chr(39), '')}'").orderBy("seq").collect()
        )
        records = [
            BatchRecord(
                source=row["source"],
                batch_id=row["batch_id"],
                seq=int(row["seq"]),
                status=row["status"],
                ranges=ranges_from_json(row["ranges"]) if row["ranges"] else [],
                next_offsets=_offsets_from_json(row["next_offsets"]),
                recorded_at=row["recorded_at"],
            )
            for row in rows
        ]
        done = {r.batch_id for r in records if r.status == COMMITTED}
        committed = max((r for r in records if r.status == COMMITTED), key=lambda r: r.seq, default=None)
        floor = committed.seq if committed else 0
        pending = max(
            (r for r in records if r.status == PLANNED and r.batch_id not in done and r.seq > floor),
            key=lambda r: r.seq,
            default=None,
        )
        return committed, pending

    def new_batch_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"

    def append(
        self,
        rec: BatchRecord,
        summary: dict[str, Any] | None = None,
    ) -> datetime:
        """Append a row (summary JSON and its typed columns); returns its ``recorded_at`` (naive local time,
        as PySpark returns timestamps)."""
        recorded_at = rec.recorded_at or datetime.now()
        values = {
            "source": rec.source,
            "batch_id": rec.batch_id,
            "seq": rec.seq,
            "status": rec.status,
            "ranges": ranges_to_json(rec.ranges),
            "next_offsets": _offsets_to_json(rec.next_offsets),
            "recorded_at": recorded_at,
            "summary": json.dumps(summary, sort_keys=True, default=str) if summary is not None else None,
            **batch_columns(rec, summary),
        }
        schema = self.spark.table(self.name).schema
        frame = self.spark.createDataFrame([tuple(values.get(f.name) for f in schema.fields)], schema)
        frame.writeTo(self.name).option("snapshot-property.cdc.batch-id", rec.batch_id).append()
        return recorded_at
