"""Audit phase: the batch's dead letters, transaction verdicts and schema changes written to ``cdc_audit``
(once per batch, see :mod:`cdclake.lake.audit`), and the batch's own consistency checks of schema changes
against its data events (:mod:`cdclake.ingest.schema_checks`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.ingest.schema_checks import audit_rows as schema_change_rows
from cdclake.ingest.schema_checks import table_ddls, unexplained
from cdclake.ingest.summary import DeadLetterCounts, dead_letter_counts, describe_dead_letters
from cdclake.ingest.transactions import TxStatus, audit_rows, before_cuts
from cdclake.lake import audit
from cdclake.lake.names import table_identifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.decode import BatchDecoded
    from cdclake.ingest.batch.plan import BatchPlan
    from cdclake.ingest.batch.transactions import TxDecision
    from cdclake.ingest.summary import TableResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Audited:
    """What the audit phase recorded and found.

    Attributes:
        dead_letters: dead-lettered records per topic-partition and per topic and reason.
        dead_by_table: dead-lettered records per lake identifier of the topic's table (only tables the
            apply phase has a result for).
        schema_problems: schema changes the batch's data events do not explain.
    """

    dead_letters: DeadLetterCounts
    dead_by_table: dict[str, int]
    schema_problems: list[str]


def write_audit(
    ctx: BatchContext, plan: BatchPlan, decoded: BatchDecoded, tx: TxDecision, tables: Mapping[str, TableResult]
) -> Audited:
    """Record the batch's side outputs, and check its schema changes.

    Args:
        tables: what the apply phase did to each table (by lake identifier).
    """
    with ctx.timed("dead-letters"):
        dead_letters = DeadLetterCounts()
        if decoded.has("dead_letters"):
            dead = before_cuts(decoded.batch.dead_letters, tx.cuts, "topic", "partition", "offset")
            dead_letters = _dead_letters(ctx, plan, dead)
        tables_of = {t: table_identifier(tid) for tid, i in decoded.batch.table_info.items() for t in i.topics}
        dead_by_table: dict[str, int] = {}
        for topic, reasons in dead_letters.by_reason.items():
            if tables_of.get(topic) in tables:
                dead_by_table[tables_of[topic]] = dead_by_table.get(tables_of[topic], 0) + sum(reasons.values())
        _transactions(ctx, plan, tx)
    with ctx.timed("schema-audit"):
        problems = _schema_changes(ctx, plan, decoded, tables)
    return Audited(dead_letters, dead_by_table, problems)


def dead_letter_rows(source: str, batch_id: str, records: DataFrame, reason: Column) -> DataFrame:
    """Kafka records (``topic, partition, offset, key, value``) as rows of ``cdc_audit.dead_letters``."""
    return records.select(
        F.lit(source).alias("source"),
        F.lit(batch_id).alias("batch_id"),
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        reason.alias("reason"),
        F.current_timestamp().alias("recorded_at"),
    )


def _dead_letters(ctx: BatchContext, plan: BatchPlan, dead: DataFrame) -> DeadLetterCounts:
    """Write the batch's dead letters once; returns their numbers per topic-partition and per topic and reason
    (one aggregation, by topic, partition and reason)."""
    counts = dead_letter_counts(
        (r["topic"], int(r["partition"]), r["reason"], int(r["count"]))
        for r in dead.groupBy("topic", "partition", "reason").count().collect()
    )
    if not counts.total:
        return counts
    rows = dead_letter_rows(ctx.name, plan.batch_id, dead, F.col("reason"))
    if audit.append_frame(ctx.spark, audit.DEAD_LETTERS, rows, plan.batch_id, redo=plan.redo):
        logger.warning(
            "source %s batch %s: %d records dead-lettered into %s (%s)",
            ctx.name,
            plan.batch_id,
            counts.total,
            audit.DEAD_LETTERS.identifier,
            "; ".join(describe_dead_letters(counts.by_reason)),
        )
    return counts


def _transactions(ctx: BatchContext, plan: BatchPlan, tx: TxDecision) -> None:
    rows = audit_rows(tx.plan, ctx.name, plan.batch_id)
    settled = None if tx.plan.settled is None else tx.plan.settled.audit_rows(ctx.name, plan.batch_id)
    audit.append_rows(ctx.spark, audit.TRANSACTIONS, rows, plan.batch_id, redo=plan.redo, more=settled)
    for t in tx.plan.transactions.values():
        if t.status is TxStatus.MISMATCHED:
            logger.error(
                "source %s transaction %s: END counts %s, decoded %s (MISMATCH)",
                ctx.name,
                t.key,
                t.expected,
                t.observed,
            )
        elif t.status is TxStatus.EXPIRED:
            logger.error(
                "source %s transaction %s: incomplete for more than %ss, applied as is (END seen: %s)",
                ctx.name,
                t.key,
                ctx.source.max_incomplete_age_s,
                t.end_seen,
            )


def _schema_changes(
    ctx: BatchContext, plan: BatchPlan, decoded: BatchDecoded, tables: Mapping[str, TableResult]
) -> list[str]:
    """Record the batch's schema changes (source DDL and lake evolutions); returns the unexplained ones."""
    batch = decoded.batch
    ddls = table_ddls(batch.schema_changes) if decoded.has("schema_changes") else []
    data_columns = {
        f"{tid.namespace}.{tid.table}": [f.name for f in batch.table_info[tid].schema.fields] for tid in batch.tables
    }
    names = {f"{tid.namespace}.{tid.table}": tid for tid in batch.tables}
    first_positions = {}
    for ddl_table in {d.table for d in ddls} & set(names):
        top = decoded.own[names[ddl_table]].agg(F.min("_cdc_position").alias("p")).collect()[0]["p"]
        if top is not None:
            first_positions[ddl_table] = [int(x) for x in top]
    # the DDL of the batch is complete when the batch read its schema topic up to the end seen at planning
    schema_ranges = [r for r in plan.ranges if r.topic == ctx.source.topic_prefix]
    complete = plan.latest is not None and all(
        plan.latest.get((r.topic, r.partition), r.end) <= r.end for r in schema_ranges
    )
    problems = unexplained(ddls, data_columns, first_positions, complete)
    evolutions = {t: r.as_dict() for t, r in tables.items()}
    rows = schema_change_rows(ctx.name, plan.batch_id, ddls, evolutions)
    audit.append_rows(ctx.spark, audit.SCHEMA_CHANGES, rows, plan.batch_id, redo=plan.redo)
    return problems
