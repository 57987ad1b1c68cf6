"""Batch state of a source in the lake (``lake.cdc_audit.batches``): the exactly-once ledger.

Every batch writes two rows: ``planned`` (its exact offset ranges, before any table is touched) and
``committed`` (after every table has been applied, with the batch summary). The next batch starts
at the ``next_offsets`` of the last committed row; a ``planned`` row without its ``committed`` row
is a batch interrupted by a crash, and the next run redoes exactly those ranges.

The job reads and writes the ledger through pyiceberg, on the same catalog as its Spark session
(:mod:`cdclake.lake.rows`): a few rows, where a Spark query and an Iceberg write from Spark would cost a
query plan and a job each. Each row is its own Iceberg commit.

Besides the summary JSON (:class:`cdclake.ingest.summary.BatchSummary`), the ``committed`` row carries
typed columns (:data:`BATCH_COLUMNS`): records and dead letters, the offset range of every topic-partition,
per table and op the events decoded / held (incomplete transactions) / applied / skipped (stale) /
quarantined / dead-lettered, transaction counts and seconds per phase. Both rows of a batch its ``max_records``
cut carry ``capped_at``, the point of the source's order the cap cut it at (:class:`BatchRecord`), so that a
redo decides its transactions as the interrupted run did. A ledger that lacks one of them gets it on first use
(:func:`add_missing_columns`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.ingest.offsets import OffsetRange, TopicPartition, ranges_from_json, ranges_to_json
from cdclake.lake import audit
from cdclake.lake import rows as lake_rows
from cdclake.lake.catalog import LakeConfig
from cdclake.lake.names import audit_table
from cdclake.sql import quote_identifier

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

BATCHES = audit.BATCHES
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
    ("capped_at", "TIMESTAMP"),
)


def ledger_schema() -> pa.Schema:
    """The ledger's columns: the eight of every ledger, then :data:`BATCH_COLUMNS` (their Spark SQL types as
    Arrow types; an older ledger gets the ones it lacks, see :meth:`BatchLedger.ensure`)."""
    import pyarrow as pa

    text = pa.string()
    offset_range = pa.struct(
        [("topic", text), ("partition", pa.int32()), ("start_offset", pa.int64()), ("end_offset", pa.int64()),
         ("next_offset", pa.int64()), ("dead_lettered", pa.int64())]
    )  # fmt: skip
    table_count = pa.struct(
        [("table", text), ("op", text), ("decoded", pa.int64()), ("held", pa.int64()), ("applied", pa.int64()),
         ("skipped", pa.int64()), ("quarantined", pa.int64()), ("dead_lettered", pa.int64())]
    )  # fmt: skip
    typed = {
        "records": pa.int64(),
        "dead_lettered": pa.int64(),
        "offset_ranges": pa.list_(offset_range),
        "table_counts": pa.list_(table_count),
        "tx_complete": pa.int64(),
        "tx_held": pa.int64(),
        "tx_mismatched": pa.int64(),
        "tx_expired": pa.int64(),
        "phase_seconds": pa.map_(text, pa.float64()),
        "capped_at": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema(
        [
            pa.field("source", text, nullable=False),
            pa.field("batch_id", text, nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("status", text, nullable=False),
            pa.field("ranges", text),
            pa.field("next_offsets", text),
            pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
            pa.field("summary", text),
            *[pa.field(name, typed[name]) for name, _ in BATCH_COLUMNS],
        ]
    )


@dataclass(frozen=True)
class BatchRecord:
    """One row of the ledger.

    ``capped_at``: for a batch ``max_records`` cut, the Kafka timestamp up to which its capped partitions were
    read (naive local time, as ``recorded_at``), which the ages of the transactions the cut may leave short are
    measured up to (:mod:`cdclake.ingest.batch.plan`); None for a batch read to the log's end.
    """

    source: str
    batch_id: str
    seq: int
    status: str
    ranges: list[OffsetRange]
    next_offsets: dict[TopicPartition, int]
    recorded_at: datetime | None = None
    capped_at: datetime | None = None


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
    """Add the ``(name, Spark SQL type)`` columns ``table`` lacks (a ledger that lacks them); returns their names."""
    present = {f.name for f in spark.table(table).schema.fields}
    missing = [(n, t) for n, t in columns if n not in present]
    if missing:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(f'{quote_identifier(n)} {t}' for n, t in missing)})")
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

    A ``planned`` row (no summary) has only ``offset_ranges`` (without dead letters) and ``capped_at``.
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
        return {name: None for name, _ in BATCH_COLUMNS} | {"offset_ranges": offset_ranges, "capped_at": rec.capped_at}
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
        "capped_at": rec.capped_at,
    }


def rows_from(source: str, start: int | None) -> BooleanExpression:
    """The ledger's filter of ``source``'s rows from ``seq`` ``start`` on (all of them when None): the files whose
    column bounds exclude them are not read."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual

    rows = EqualTo("source", source)
    return rows if start is None else And(rows, GreaterThanOrEqual("seq", start))


class BatchLedger:
    """Reads and appends the ledger rows of one source (through pyiceberg, see the module docstring).

    Args:
        spark: the job's session; its lake catalog is the one opened (:func:`cdclake.lake.rows.session_catalog`).
        source: the source id.
        lake: the lake, when known (default: the session's).
    """

    def __init__(self, spark: SparkSession, source: str, lake: LakeConfig | None = None) -> None:
        self.spark = spark
        self.source = source
        self.name = audit_table(BATCHES)
        self._lake = lake

    _ensured: set[tuple[str, tuple[str, ...]]] = set()
    #: per (catalog, ledger, source): the ``seq`` of the last committed batch :meth:`last` found in this process
    _starts: dict[tuple[str, tuple[str, ...], str], int] = {}

    def ensure(self) -> None:
        """Create the audit namespace and the ledger table, or add the typed columns an older ledger lacks
        (once per process and lake)."""
        catalog = lake_rows.session_catalog(self.spark, self._lake)
        ident = lake_rows.identifier(self.name)
        marker = (str(catalog.properties.get("uri")), ident)
        if marker in BatchLedger._ensured:
            return
        lake_rows.ensure_namespace(catalog, ident[:-1])
        schema = ledger_schema()
        table = catalog.create_table_if_not_exists(
            ident,
            schema=schema,
            properties={
                "format-version": "2",
                "comment": f"cdclake batch ledger ({PLANNED}/{COMMITTED} rows)",
                **lake_rows.APPEND_TABLE_PROPERTIES,
            },
        )
        present = {f.name for f in table.schema().fields}
        if any(name not in present for name in schema.names):
            with table.update_schema() as update:
                update.union_by_name(schema)
        BatchLedger._ensured.add(marker)

    def last(self) -> tuple[BatchRecord | None, BatchRecord | None]:
        """(last committed batch, interrupted batch to redo or None).

        Reads the source's rows from the ``seq`` of the last committed batch an earlier call of this process found
        (a batch's rows have a greater ``seq`` than every committed batch before it), so that a follower's read
        skips, by the files' column bounds, the files of the batches it already saw; all of them on the first call,
        or when no committed row is left from there on (a ledger edited by hand).
        """
        catalog = lake_rows.session_catalog(self.spark, self._lake)
        ident = lake_rows.identifier(self.name)
        table = catalog.load_table(ident)
        key = (str(catalog.properties.get("uri")), ident, self.source)
        start = BatchLedger._starts.get(key)
        records = self._records(table, start)
        if start is not None and not any(r.status == COMMITTED for r in records):
            records = self._records(table, None)
        done = {r.batch_id for r in records if r.status == COMMITTED}
        committed = max((r for r in records if r.status == COMMITTED), key=lambda r: r.seq, default=None)
        committed_seq = committed.seq if committed else 0
        if committed is not None:
            BatchLedger._starts[key] = committed.seq
        pending = max(
            (r for r in records if r.status == PLANNED and r.batch_id not in done and r.seq > committed_seq),
            key=lambda r: r.seq,
            default=None,
        )
        return committed, pending

    def _records(self, table: Table, start: int | None) -> list[BatchRecord]:
        """The source's rows, from ``seq`` ``start`` on (all when None), in ``seq`` order."""
        fields = ("source", "batch_id", "seq", "status", "ranges", "next_offsets", "recorded_at", "capped_at")
        present = {f.name for f in table.schema().fields}
        found = table.scan(
            row_filter=rows_from(self.source, start), selected_fields=tuple(f for f in fields if f in present)
        ).to_arrow()
        return [
            BatchRecord(
                source=row["source"],
                batch_id=row["batch_id"],
                seq=int(row["seq"]),
                status=row["status"],
                ranges=ranges_from_json(row["ranges"]) if row["ranges"] else [],
                next_offsets=_offsets_from_json(row["next_offsets"]),
                recorded_at=lake_rows.local_time(row["recorded_at"]),
                capped_at=lake_rows.local_time(row.get("capped_at")),
            )
            for row in sorted(found.to_pylist(), key=lambda r: r["seq"])
        ]

    def new_batch_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"

    def append(
        self,
        rec: BatchRecord,
        summary: dict[str, Any] | None = None,
    ) -> datetime:
        """Append a row (summary JSON and its typed columns) in a commit of its own carrying
        ``cdc.batch-id``; returns its ``recorded_at`` (naive local time, as PySpark returns timestamps).

        Raises:
            CommitFailedException: see :func:`cdclake.lake.rows.append_rows`.
        """
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
        lake_rows.append_rows(self.spark, self.name, [values], batch_id=rec.batch_id, lake=self._lake)
        return recorded_at
