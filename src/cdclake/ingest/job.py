"""One ingestion batch of one source: plan -> read -> decode -> apply per table -> commit the ledger.

Exactly-once: see :mod:`cdclake.ingest.state`. Each table's MERGE commit carries ``cdc.batch-id``,
``cdc.source``, ``cdc.offsets`` (the batch's offset ranges, JSON) and ``cdc.watermark`` (the greatest
``_cdc_position`` of the table in the batch) in its Iceberg snapshot summary.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdclake.decode import decode_records
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.faults import checkpoint
from cdclake.ingest.naming import AUDIT_NAMESPACE, audit_table
from cdclake.ingest.plan import end_offsets, plan_ranges, ranges_to_json
from cdclake.ingest.schema import SchemaEvolutionError
from cdclake.ingest.schema_audit import audit_rows as schema_audit_rows
from cdclake.ingest.schema_audit import table_ddls, unexplained
from cdclake.ingest.sources import RecordSource
from cdclake.ingest.state import COMMITTED, PLANNED, BatchLedger, BatchRecord
from cdclake.ingest.tables import TableApplier, TableResult
from cdclake.ingest.transactions import (
    TxPlan,
    TxStatus,
    audit_rows,
    before_cuts,
    cut_offsets,
    decide,
    gather,
    group_by_status,
)
from cdclake.lake.catalog import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

DEAD_LETTERS_DDL = """CREATE TABLE IF NOT EXISTS {name} (
  source STRING, batch_id STRING, topic STRING, `partition` INT, `offset` BIGINT,
  key STRING, value STRING, reason STRING, recorded_at TIMESTAMP
) USING iceberg TBLPROPERTIES ('format-version'='2')"""
TRANSACTIONS_DDL = """CREATE TABLE IF NOT EXISTS {name} (
  source STRING, batch_id STRING, tx_id STRING, data_collection STRING, expected BIGINT, applied BIGINT,
  seen BIGINT, status STRING, end_seen BOOLEAN, recorded_at TIMESTAMP
) USING iceberg TBLPROPERTIES ('format-version'='2')"""
SCHEMA_CHANGES_DDL = """CREATE TABLE IF NOT EXISTS {name} (
  source STRING, batch_id STRING, `table` STRING, kind STRING, detail STRING, ddl STRING, position STRING,
  recorded_at TIMESTAMP
) USING iceberg TBLPROPERTIES ('format-version'='2')"""
QUARANTINE_DDL = """CREATE TABLE IF NOT EXISTS {name} (
  source STRING, batch_id STRING, `table` STRING, topic STRING, `partition` INT, `offset` BIGINT,
  key STRING, value STRING, reason STRING, recorded_at TIMESTAMP
) USING iceberg TBLPROPERTIES ('format-version'='2')"""


@dataclass
class BatchSummary:
    """What one batch did (also written, as JSON, into the ledger's committed row)."""

    source: str
    batch_id: str | None
    status: str
    ranges: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    dead_lettered: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    redo: bool = False
    transactions: dict[str, Any] = field(default_factory=dict)

    held_everything: bool = False
    schema_problems: list[str] = field(default_factory=list)

    @property
    def changed_tables(self) -> list[str]:
        return sorted(t for t, r in self.tables.items() if r.get("applied") and not r.get("already_applied"))

    def as_dict(self) -> dict[str, Any]:
        problems = [f"{t}: quarantined: {r['quarantined']}" for t, r in self.tables.items() if r.get("quarantined")]
        problems += list(self.schema_problems)
        problems += [
            f"transaction {tx}: {status}"
            for status in ("mismatched", "expired")
            for tx in self.transactions.get("ids", {}).get(status, [])
        ]
        return {
            "source": self.source,
            "batch_id": self.batch_id,
            "status": self.status,
            "redo": self.redo,
            "offsets": self.ranges,
            "records": self.records,
            "counts": self.counts,
            "tables": self.tables,
            "changed_tables": self.changed_tables,
            "dead_lettered": self.dead_lettered,
            "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
            "transactions": self.transactions,
            "reconciliation": {"ok": not problems, "problems": problems},
        }


class _Timer:
    def __init__(self, phases: dict[str, float]) -> None:
        self.phases = phases

    def __call__(self, name: str) -> _Phase:
        return _Phase(self.phases, name)


class _Phase:
    def __init__(self, phases: dict[str, float], name: str) -> None:
        self.phases, self.name = phases, name

    def __enter__(self) -> None:
        self.t0 = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.phases[self.name] = self.phases.get(self.name, 0.0) + time.monotonic() - self.t0


def run_batch(
    spark: SparkSession,
    source: SourceConfig,
    records: RecordSource,
    *,
    max_records: int | None = None,
) -> BatchSummary:
    """Run one batch for ``source``: from the offsets committed in the lake to the source's current end.

    A batch interrupted earlier (planned but never committed) is redone first, with the same ranges.

    Raises:
        SchemaEvolutionError: when a table's schema policy is ``fail`` and its schema changed.
        RecordSourceError: when records cannot be listed or read.
    """
    phases: dict[str, float] = {}
    timed = _Timer(phases)
    ledger = BatchLedger(spark, source.name)
    latest: dict[tuple[str, int], int] | None = None  # partition ends, known for fresh batches only
    with timed("plan"):
        ledger.ensure()
        committed, pending = ledger.last()
        if pending is not None:
            ranges, batch_id, seq, next_offsets, redo = (
                pending.ranges,
                pending.batch_id,
                pending.seq,
                pending.next_offsets,
                True,
            )
            planned_at = pending.recorded_at or datetime.now()
            logger.warning("source %s: redoing interrupted batch %s", source.name, batch_id)
        else:
            earliest, latest = records.watermarks()
            start = committed.next_offsets if committed else {}
            ranges = plan_ranges(start, earliest, latest, max_records)
            if not ranges:
                return BatchSummary(source=source.name, batch_id=None, status="no-new-records", phases=phases)
            batch_id = ledger.new_batch_id()
            seq = (committed.seq + 1) if committed else 1
            next_offsets = {**(committed.next_offsets if committed else {}), **end_offsets(ranges)}
            planned_at = ledger.append(BatchRecord(source.name, batch_id, seq, PLANNED, ranges, next_offsets))
            redo = False
            checkpoint("planned")
    summary = BatchSummary(
        source=source.name,
        batch_id=batch_id,
        status=COMMITTED,
        ranges=json.loads(ranges_to_json(ranges)),
        records=sum(r.count for r in ranges),
        redo=redo,
        phases=phases,
    )
    logger.info("source %s batch %s: %d records in %d partitions", source.name, batch_id, summary.records, len(ranges))
    with timed("read+decode"):
        raw = records.read(spark, ranges).persist()
        decoded = decode_records(raw, options=source.decode_options())
        summary.counts = decoded.counts()
    with timed("transactions"):
        tx_plan = decide(
            gather(decoded.tables.values(), decoded.transactions, source.signal_tables),
            end_offsets(ranges),
            now=planned_at,
            max_incomplete_age=timedelta(seconds=source.max_incomplete_age_s),
            enabled=source.transaction_consistent,
        )
        cuts = tx_plan.cuts
        next_offsets = cut_offsets(next_offsets, cuts)
        summary.held_everything = bool(cuts) and all(cuts.get((r.topic, r.partition), r.end) <= r.start for r in ranges)
        summary.transactions = _tx_summary(tx_plan)
        if cuts:
            logger.info(
                "source %s batch %s: holding %d incomplete transactions; partitions cut at %s",
                source.name,
                batch_id,
                len(tx_plan.held),
                cuts,
            )
    batch_props = {"cdc.batch-id": batch_id, "cdc.source": source.name, "cdc.offsets": ranges_to_json(ranges)}
    frontier = tx_plan.frontier()
    if frontier is not None:
        batch_props["cdc.frontier"] = json.dumps(
            {"batch_id": batch_id, "tx": frontier.key, "position": frontier.position}, separators=(",", ":")
        )
    try:
        with timed("apply"):
            for table_id, frame in sorted(decoded.tables.items(), key=lambda kv: kv[0].name):
                info = decoded.table_info[table_id]
                applier = TableApplier(spark, info, source.lake_options(table_id), batch_props)
                frame = before_cuts(frame, cuts)
                try:
                    result = applier.apply(frame, batch_id, redo=redo)
                except SchemaEvolutionError as exc:
                    if source.lake_options(table_id).schema_policy.value == "fail":
                        raise
                    result = TableResult(
                        table=applier.identifier, mode=applier.options.mode.value, quarantined=str(exc)
                    )
                    _quarantine(spark, source, batch_id, applier.identifier, frame, raw, str(exc), redo)
                    logger.error("QUARANTINED %s: %s", applier.identifier, exc)
                summary.tables[result.table] = result.as_dict()
                checkpoint(f"table:{len(summary.tables)}")
                logger.info("source %s batch %s table %s: %s", source.name, batch_id, result.table, result.as_dict())
        with timed("dead-letters"):
            dead = before_cuts(decoded.dead_letters, cuts, "topic", "partition", "offset")
            summary.dead_lettered = _dead_letters(spark, source, batch_id, dead, redo)
            _transactions_audit(spark, tx_plan, source, batch_id, redo)
        with timed("schema-audit"):
            ddls = table_ddls(decoded.schema_changes)
            data_columns = {
                f"{tid.namespace}.{tid.table}": [f.name for f in decoded.table_info[tid].schema.fields]
                for tid in decoded.tables
            }
            names = {f"{tid.namespace}.{tid.table}": tid for tid in decoded.tables}
            first_positions = {}
            for ddl_table in {d.table for d in ddls} & set(names):
                top = decoded.tables[names[ddl_table]].agg(F.min("_cdc_position").alias("p")).collect()[0]["p"]
                if top is not None:
                    first_positions[ddl_table] = [int(x) for x in top]
            schema_topics = {r.topic: r for r in ranges if r.topic == source.topic_prefix}
            complete = latest is not None and all(
                latest.get((t, r.partition), r.end) <= r.end for t, r in schema_topics.items()
            )
            summary.schema_problems = unexplained(ddls, data_columns, first_positions, complete)
            _append_audit_rows(
                spark,
                "schema_changes",
                SCHEMA_CHANGES_DDL,
                schema_audit_rows(source.name, batch_id, ddls, summary.tables),
                batch_id,
                redo,
            )
        checkpoint("before-commit")
        with timed("commit"):
            ledger.append(BatchRecord(source.name, batch_id, seq, COMMITTED, ranges, next_offsets), summary.as_dict())
        checkpoint("after-commit")
    finally:
        raw.unpersist()
    return summary


def _tx_summary(plan: TxPlan) -> dict[str, Any]:
    frontier = plan.frontier()
    grouped = group_by_status(plan)
    return {
        "mode": "consistent" if plan.enabled else "off",
        "counts": plan.counts(),
        "ids": {k: sorted(v)[:50] for k, v in grouped.items() if k not in ("complete", "empty")},
        "cuts": {f"{t}/{p}": off for (t, p), off in sorted(plan.cuts.items())},
        "frontier": None if frontier is None else {"tx": frontier.key, "position": frontier.position},
    }


def _append_audit_rows(
    spark: SparkSession, name: str, ddl: str, rows: list[dict[str, Any]], batch_id: str, redo: bool
) -> None:
    """Append ``rows`` (plus ``recorded_at``) to ``lake.cdc_audit.<name>`` once per batch."""
    if not rows:
        return
    table = _audit_ddl(spark, name, ddl)
    if _already(spark, table, batch_id, redo):
        return
    frame = spark.createDataFrame(rows, spark.table(table).drop("recorded_at").schema).withColumn(
        "recorded_at", F.current_timestamp()
    )
    frame.writeTo(table).option("snapshot-property.cdc.batch-id", batch_id).append()


def _transactions_audit(spark: SparkSession, plan: TxPlan, source: SourceConfig, batch_id: str, redo: bool) -> None:
    _append_audit_rows(spark, "transactions", TRANSACTIONS_DDL, audit_rows(plan, source.name, batch_id), batch_id, redo)
    for tx in plan.transactions.values():
        if tx.status is TxStatus.MISMATCHED:
            logger.error(
                "source %s transaction %s: END counts %s, decoded %s (MISMATCH)",
                source.name,
                tx.key,
                tx.expected,
                tx.observed,
            )
        elif tx.status is TxStatus.EXPIRED:
            logger.error(
                "source %s transaction %s: incomplete for more than %ss, applied as is (END seen: %s)",
                source.name,
                tx.key,
                source.max_incomplete_age_s,
                tx.end_seen,
            )


def _audit_ddl(spark: SparkSession, name: str, ddl: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{AUDIT_NAMESPACE}")
    table = audit_table(name)
    spark.sql(ddl.format(name=table))
    return table


def _already(spark: SparkSession, table: str, batch_id: str, redo: bool = True) -> bool:
    if not redo:
        return False
    return bool(
        spark.sql(
            f"SELECT count(*) AS n FROM {table}.snapshots WHERE summary['cdc.batch-id'] = '{batch_id}'"
        ).collect()[0]["n"]
    )


def _dead_letters(spark: SparkSession, source: SourceConfig, batch_id: str, dead: DataFrame, redo: bool) -> int:
    count = dead.count()
    if not count:
        return 0
    table = _audit_ddl(spark, "dead_letters", DEAD_LETTERS_DDL)
    if _already(spark, table, batch_id, redo):
        return count
    out = dead.select(
        F.lit(source.name).alias("source"),
        F.lit(batch_id).alias("batch_id"),
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "reason",
        F.current_timestamp().alias("recorded_at"),
    )
    out.writeTo(table).option("snapshot-property.cdc.batch-id", batch_id).append()
    logger.warning("source %s batch %s: %d records dead-lettered into %s", source.name, batch_id, count, table)
    return count


def _quarantine(
    spark: SparkSession,
    source: SourceConfig,
    batch_id: str,
    identifier: str,
    frame: DataFrame,
    raw: DataFrame,
    reason: str,
    redo: bool = True,
) -> None:
    table = _audit_ddl(spark, "quarantine", QUARANTINE_DDL)
    if _already(spark, table, batch_id + ":" + identifier, redo):
        return
    coords = frame.select(
        F.col("_cdc_topic").alias("topic"),
        F.col("_cdc_partition").alias("partition"),
        F.col("_cdc_offset").alias("offset"),
    )
    held = coords.join(
        raw.select("topic", "partition", "offset", "key", "value"), ["topic", "partition", "offset"]
    ).select(
        F.lit(source.name).alias("source"),
        F.lit(batch_id).alias("batch_id"),
        F.lit(identifier).alias("table"),
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        F.lit(reason).alias("reason"),
        F.current_timestamp().alias("recorded_at"),
    )
    held.writeTo(table).option("snapshot-property.cdc.batch-id", batch_id + ":" + identifier).append()
