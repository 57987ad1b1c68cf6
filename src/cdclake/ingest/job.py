"""One ingestion batch of one source: plan -> read -> decode -> apply per table -> commit the ledger.

Exactly-once: see :mod:`cdclake.ingest.state`. Each table's MERGE commit carries ``cdc.batch-id``,
``cdc.source``, ``cdc.offsets`` (the batch's offset ranges, JSON) and ``cdc.watermark`` (the greatest
``_cdc_position`` of the table in the batch) in its Iceberg snapshot summary.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdclake.decode import decode_records
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.faults import checkpoint
from cdclake.ingest.naming import AUDIT_NAMESPACE, audit_table
from cdclake.ingest.plan import end_offsets, plan_ranges, ranges_to_json
from cdclake.ingest.schema import SchemaEvolutionError
from cdclake.ingest.sources import RecordSource
from cdclake.ingest.state import COMMITTED, PLANNED, BatchLedger, BatchRecord
from cdclake.ingest.tables import TableApplier, TableResult
from cdclake.lake.catalog import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

DEAD_LETTERS_DDL = """CREATE TABLE IF NOT EXISTS {name} (
  source STRING, batch_id STRING, topic STRING, `partition` INT, `offset` BIGINT,
  key STRING, value STRING, reason STRING, recorded_at TIMESTAMP
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

    @property
    def changed_tables(self) -> list[str]:
        return sorted(t for t, r in self.tables.items() if r.get("applied") and not r.get("already_applied"))

    def as_dict(self) -> dict[str, Any]:
        problems = [f"{t}: quarantined: {r['quarantined']}" for t, r in self.tables.items() if r.get("quarantined")]
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
            ledger.append(BatchRecord(source.name, batch_id, seq, PLANNED, ranges, next_offsets))
            redo = False
            checkpoint("planned")
    import json

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
    batch_props = {"cdc.batch-id": batch_id, "cdc.source": source.name, "cdc.offsets": ranges_to_json(ranges)}
    try:
        with timed("apply"):
            for table_id, frame in sorted(decoded.tables.items(), key=lambda kv: kv[0].name):
                info = decoded.table_info[table_id]
                applier = TableApplier(spark, info, source.lake_options(table_id), batch_props)
                try:
                    result = applier.apply(frame, batch_id)
                except SchemaEvolutionError as exc:
                    if source.lake_options(table_id).schema_policy.value == "fail":
                        raise
                    result = TableResult(
                        table=applier.identifier, mode=applier.options.mode.value, quarantined=str(exc)
                    )
                    _quarantine(spark, source, batch_id, applier.identifier, frame, raw, str(exc))
                    logger.error("QUARANTINED %s: %s", applier.identifier, exc)
                summary.tables[result.table] = result.as_dict()
                checkpoint(f"table:{len(summary.tables)}")
                logger.info("source %s batch %s table %s: %s", source.name, batch_id, result.table, result.as_dict())
        with timed("dead-letters"):
            summary.dead_lettered = _dead_letters(spark, source, batch_id, decoded.dead_letters)
        checkpoint("before-commit")
        with timed("commit"):
            ledger.append(BatchRecord(source.name, batch_id, seq, COMMITTED, ranges, next_offsets), summary.as_dict())
        checkpoint("after-commit")
    finally:
        raw.unpersist()
    return summary


def _audit_ddl(spark: SparkSession, name: str, ddl: str) -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{AUDIT_NAMESPACE}")
    table = audit_table(name)
    spark.sql(ddl.format(name=table))
    return table


def _already(spark: SparkSession, table: str, batch_id: str) -> bool:
    return bool(
        spark.sql(
            f"SELECT count(*) AS n FROM {table}.snapshots WHERE summary['cdc.batch-id'] = '{batch_id}'"
        ).collect()[0]["n"]
    )


def _dead_letters(spark: SparkSession, source: SourceConfig, batch_id: str, dead: DataFrame) -> int:
    count = dead.count()
    if not count:
        return 0
    table = _audit_ddl(spark, "dead_letters", DEAD_LETTERS_DDL)
    if _already(spark, table, batch_id):
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
) -> None:
    table = _audit_ddl(spark, "quarantine", QUARANTINE_DDL)
    if _already(spark, table, batch_id + ":" + identifier):
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
