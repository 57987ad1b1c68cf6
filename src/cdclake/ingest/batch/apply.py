"""Apply phase: each table's change rows MERGEd or appended, quarantined tables held, releases carried out.

A table whose events cannot be applied (its schema changed beyond its policy) is quarantined: its events
are held in ``cdc_audit.quarantine``, and so are the later batches' until the table is released
(``cdclake quarantine release``). The batch after a release re-reads the held records with its own
(``evolve``, ``recreate``) or copies them to the dead letters (``discard``), and records the outcome in
``cdc_audit.quarantine_releases``. See :mod:`cdclake.ingest.quarantine`.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.connectors.spec import SchemaPolicy
from cdclake.decode.records import HEADER_TYPE
from cdclake.exceptions import SchemaEvolutionError
from cdclake.ingest.batch.audit import dead_letter_rows
from cdclake.ingest.faults import crash_point
from cdclake.ingest.quarantine import (
    QuarantineState,
    ReleaseAction,
    ReleaseRecord,
    ReleaseStatus,
    discard_reason,
    held_records,
    release_hint,
    replaced_suffix,
)
from cdclake.ingest.summary import TableResult
from cdclake.ingest.tables import TableApplier
from cdclake.ingest.transactions import before_cuts
from cdclake.lake import audit
from cdclake.settings import settings
from cdclake.spark import SESSION_SETTINGS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdclake.decode.batch import TableStats
    from cdclake.decode.options import TableId
    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.decode import BatchDecoded
    from cdclake.ingest.batch.plan import BatchPlan
    from cdclake.ingest.batch.read import BatchRecords
    from cdclake.ingest.batch.transactions import TxDecision

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Applied:
    """What the apply phase did: each table's result (by lake identifier), and the releases' outcomes."""

    tables: dict[str, TableResult]
    outcomes: list[ReleaseRecord]


def apply_tables(
    ctx: BatchContext, plan: BatchPlan, decoded: BatchDecoded, tx: TxDecision, records: BatchRecords
) -> Applied:
    """Apply every table of the batch, up to ``CDC_APPLY_THREADS`` at once, each in a thread of its own (a table's
    commits keep their order; the first failure stops the tables not started yet); then record the releases'
    outcomes (once per batch). The results are in name order; ``CDC_FAULT_AT=table:N`` is reached after the N-th
    table to finish.

    Raises:
        SchemaEvolutionError: when a table's schema policy is ``fail`` and its schema changed.
    """
    spark, batch = ctx.spark, decoded.batch
    with ctx.timed("apply"):
        outcomes: list[ReleaseRecord] = []
        # before any outcome row: a redo finds the release still pending and does not copy twice
        discards = {s.table: _discard_held(ctx, plan, s) for s in plan.releases if s not in plan.replays}
        ordered = sorted(batch.tables, key=lambda t: t.name)
        done: dict[TableId, tuple[TableResult, ReleaseRecord | None]] = {}
        threads = max(1, min(settings().apply_threads, len(ordered)))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cdclake-apply") as pool:
            futures = {pool.submit(_apply_one, ctx, plan, decoded, tx, records, discards, t): t for t in ordered}
            try:
                for future in as_completed(futures):
                    result, outcome = future.result()
                    done[futures[future]] = (result, outcome)
                    crash_point(f"table:{len(done)}")
                    logger.info(
                        "source %s batch %s table %s: %s", ctx.name, plan.batch_id, result.table, result.as_dict()
                    )
            except BaseException:
                pool.shutdown(cancel_futures=True)  # the tables not started yet are not applied
                raise
        tables: dict[str, TableResult] = {}
        for table_id in ordered:
            result, outcome = done[table_id]
            outcomes += [outcome] if outcome else []
            tables[result.table] = result
        for state in plan.releases:
            if state.table in discards and state.table not in tables:  # no event of its own
                outcomes.append(discards[state.table][1])
            elif state.table not in tables:  # no held record decoded as an event of the table
                detail = "no held record decoded as a change event of the table (see cdc_audit.dead_letters)"
                outcomes.append(state.outcome(plan.batch_id, ReleaseStatus.APPLIED, detail))
        rows = [o.row() for o in outcomes]
        audit.append_rows(spark, audit.RELEASES, rows, plan.batch_id, redo=plan.redo)
        return Applied(tables, outcomes)


def _apply_one(
    ctx: BatchContext,
    plan: BatchPlan,
    decoded: BatchDecoded,
    tx: TxDecision,
    records: BatchRecords,
    discards: dict[str, tuple[QuarantineState, ReleaseRecord]],
    table_id: TableId,
) -> tuple[TableResult, ReleaseRecord | None]:
    """Apply one table of the batch (:func:`_apply_table`) with what the batch knows of it; runs in a thread of
    :func:`apply_tables`."""
    batch = decoded.batch
    info = batch.table_info[table_id]
    applier = TableApplier(ctx.spark, info, ctx.source.lake_options(table_id), tx.commit_properties)
    # the counting pass observed the stats of all the table's decoded rows: they hold when every one of
    # them is applied (no cut in the table's topics, no released records among them)
    whole = not plan.replays and not any(topic in info.topics for topic, _ in tx.cuts)
    discarded = discards.get(applier.identifier)
    # a thread of its own: its jobs are described from scratch
    with ctx.described(f"apply · {applier.identifier}"):
        result, outcome = _apply_table(
            ctx,
            plan,
            applier,
            before_cuts(batch.tables[table_id], tx.cuts),
            before_cuts(decoded.own[table_id], tx.cuts),
            # a discarded table takes its own events as if it had never been quarantined
            None if discarded else plan.quarantined.get(applier.identifier),
            records,
            decoded.blocked.get(applier.identifier),
            batch.table_stats(table_id) if whole else None,
        )
    if discarded:
        held, outcome = discarded
        result.released = {
            "action": ReleaseAction.DISCARD.value,
            "records": held.records,
            "batches": list(held.batches),
        }
    result.decoded = decoded.counts.table_ops(table_id)
    return result, outcome


def _apply_table(
    ctx: BatchContext,
    plan: BatchPlan,
    applier: TableApplier,
    frame: DataFrame,
    own: DataFrame,
    state: QuarantineState | None,
    records: BatchRecords,
    blocked: str | None = None,
    stats: TableStats | None = None,
) -> tuple[TableResult, ReleaseRecord | None]:
    """Apply one table's events; hold them when it is quarantined; apply its pending release.

    Args:
        frame: the table's change rows of the batch (released held records included).
        own: the same without released held records (what is held if the table is quarantined).
        state: the table's quarantine state, if it is quarantined.
        records: the batch's records (a held table's records are held from :attr:`BatchRecords.whole`).
        blocked: why its pending release cannot be applied in this batch (see
            :func:`cdclake.ingest.batch.decode.cuts_among_held`).
        stats: the :class:`TableStats` of ``frame``, when known.

    Returns:
        The table's result and, when a release was pending, its outcome row.

    Raises:
        SchemaEvolutionError: when the table's schema policy is ``fail`` and its schema changed.
    """
    identifier, mode, batch_id = applier.identifier, applier.options.mode.value, plan.batch_id
    if state is not None and state.release is None:
        result = TableResult(table=identifier, mode=mode, quarantined=state.reason)
        result.events = _quarantine(ctx, plan, identifier, own, records.whole, state.reason)
        logger.warning(
            "source %s batch %s: %s is quarantined since batch %s; its events are held until it is released "
            "(cdclake quarantine release %s --action evolve|recreate|discard)",
            ctx.name,
            batch_id,
            identifier,
            state.batches[0],
            identifier,
        )
        return result, None
    release = state.release if state is not None else None
    if state is not None and release is not None and blocked is not None:
        result = TableResult(table=identifier, mode=mode, quarantined=state.reason)
        result.events = _quarantine(ctx, plan, identifier, own, records.whole, state.reason)
        detail = (
            f"{blocked}: its held records cannot be replayed in one batch; the table stays quarantined "
            f"(release it with --action {ReleaseAction.DISCARD.value} to dead-letter them, then re-snapshot it)"
        )
        logger.error("source %s batch %s: release of %s failed: %s", ctx.name, batch_id, identifier, detail)
        return result, state.outcome(batch_id, ReleaseStatus.FAILED, detail)
    if release is not None:
        if release.action is ReleaseAction.RECREATE:
            applier.set_aside(replaced_suffix(batch_id))
        else:
            applier.options = applier.options.model_copy(update={"schema_policy": SchemaPolicy.EVOLVE})
    try:
        result = applier.apply(frame, batch_id, redo=plan.redo, stats=stats)
    except SchemaEvolutionError as exc:
        if release is None and applier.options.schema_policy is SchemaPolicy.FAIL:
            raise
        result = TableResult(table=identifier, mode=mode, quarantined=str(exc))
        result.events = _quarantine(ctx, plan, identifier, own, records.whole, str(exc))
        logger.error("QUARANTINED %s: %s", identifier, exc)
        if state is None:
            return result, None
        return result, state.outcome(batch_id, ReleaseStatus.FAILED, f"{exc}; {release_hint(state)}")
    if state is None or release is None:
        return result, None
    result.released = {"action": release.action.value, "records": state.records, "batches": list(state.batches)}
    logger.warning(
        "source %s batch %s: released %s (%s): %d held records re-read",
        ctx.name,
        batch_id,
        identifier,
        release.action.value,
        state.records,
    )
    return result, state.outcome(batch_id, ReleaseStatus.APPLIED)


def _discard_held(ctx: BatchContext, plan: BatchPlan, state: QuarantineState) -> tuple[QuarantineState, ReleaseRecord]:
    """A ``discard`` release: copy the table's held records to ``cdc_audit.dead_letters`` (once per batch).

    Returns:
        The held batches it released (never the running batch: in a redo, records this batch held itself
        stay held) and the release's outcome row.
    """
    batch_id = plan.batch_id
    held = replace(state, held=tuple(h for h in state.held if h.batch_id != batch_id))
    records = held_records(ctx.spark, ctx.name, [held], plan.ranges) if held.held else None
    count = records.count() if records is not None else 0
    if records is not None and count:
        rows = dead_letter_rows(ctx.name, batch_id, records, F.lit(discard_reason(state)))
        audit.append_frame(ctx.spark, audit.DEAD_LETTERS, rows, f"{batch_id}:discard:{state.table}", redo=plan.redo)
    dead_letters = audit.DEAD_LETTERS.identifier
    logger.warning(
        "source %s batch %s: release %s of %s discards %d held records into %s",
        ctx.name,
        batch_id,
        state.release.release_id if state.release else "-",
        state.table,
        count,
        dead_letters,
    )
    detail = f"{count} held record(s) discarded into {dead_letters}"
    return held, held.outcome(batch_id, ReleaseStatus.APPLIED, detail)


def _quarantine(
    ctx: BatchContext, plan: BatchPlan, identifier: str, frame: DataFrame, raw: DataFrame, reason: str
) -> dict[str, int]:
    """Hold the records of ``frame`` in ``cdc_audit.quarantine`` (once per batch and table).

    Returns:
        The held events per op.
    """
    events = {r["_cdc_op"]: int(r["count"]) for r in frame.groupBy("_cdc_op").count().collect()}
    if not events:
        return events
    coords = frame.select(
        F.col("_cdc_topic").alias("topic"),
        F.col("_cdc_partition").alias("partition"),
        F.col("_cdc_offset").alias("offset"),
    )
    present = set(raw.columns)
    record = raw.select(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        (F.col("timestamp") if "timestamp" in present else F.lit(None)).cast("timestamp").alias("timestamp"),
        (F.col("headers") if "headers" in present else F.lit(None)).cast(HEADER_TYPE).alias("headers"),
    )
    held = coords.join(record, ["topic", "partition", "offset"]).select(
        F.lit(ctx.name).alias("source"),
        F.lit(plan.batch_id).alias("batch_id"),
        F.lit(identifier).alias("table"),
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        F.lit(reason).alias("reason"),
        F.current_timestamp().alias("recorded_at"),
        "timestamp",
        "headers",
    )
    with SESSION_SETTINGS.shared():  # a commit, in a thread of the apply phase: see apply_tables
        audit.append_frame(ctx.spark, audit.QUARANTINE, held, f"{plan.batch_id}:{identifier}", redo=plan.redo)
    return events
