"""One ingestion batch of one source: plan -> read -> decode -> apply per table -> commit the ledger.

Exactly-once: see :mod:`cdclake.ingest.ledger`. Each table's last commit of the batch carries ``cdc.batch-id``,
``cdc.source``, ``cdc.offsets`` (the batch's offset ranges, JSON) and ``cdc.watermark`` (the greatest
``_cdc_position`` of the table in the batch) in its Iceberg snapshot summary (an upsert table may
commit twice, see :meth:`cdclake.ingest.tables.TableApplier._write_upsert`).

Quarantined tables (:mod:`cdclake.ingest.quarantine`): a table whose events cannot be applied has them
held in ``cdc_audit.quarantine``, and so do the later batches until the table is released; the batch
after a release re-reads the held records with its own, and records the outcome.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdclake.connectors.spec import SchemaPolicy
from cdclake.decode import STRING_RECORD_SCHEMA, DecodedBatch, TableId, decode_counted
from cdclake.decode.batch import TableStats
from cdclake.decode.records import HEADER_TYPE, normalise_records
from cdclake.exceptions import SchemaEvolutionError
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.faults import crash_point
from cdclake.ingest.naming import AUDIT_NAMESPACE, audit_table, table_identifier
from cdclake.ingest.plan import OffsetRange, TopicPartition, end_offsets, plan_ranges, ranges_to_json, within
from cdclake.ingest.quarantine import (
    QUARANTINE,
    QUARANTINE_ADDED_COLUMNS,
    QUARANTINE_DDL,
    RELEASES,
    RELEASES_DDL,
    QuarantineState,
    ReleaseAction,
    ReleaseRecord,
    ReleaseStatus,
    discard_reason,
    held_records,
    read_states,
    release_hint,
    replaced_suffix,
)
from cdclake.ingest.schema_audit import audit_rows as schema_audit_rows
from cdclake.ingest.schema_audit import table_ddls, unexplained
from cdclake.ingest.sources import FrameSampler, RecordSource
from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchLedger, BatchRecord, add_missing_columns
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
from cdclake.lake import rows as lake_rows
from cdclake.lake.catalog import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

logger = logging.getLogger(__name__)

#: Where a batch runs the steps that overlap its main line: the quarantine read while the ledger is read, the
#: PLANNED row's commit while the batch is decoded (each waited for before anything depends on it).
_BACKGROUND = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cdclake-batch")

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
    dead_by_partition: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    redo: bool = False
    transactions: dict[str, Any] = field(default_factory=dict)

    held_everything: bool = False
    schema_problems: list[str] = field(default_factory=list)
    schema_cuts: dict[str, str] = field(default_factory=dict)
    #: how the decoder found the batch's schema versions: ``sample`` or ``pass`` (see docs/decoding.md)
    discovery: str | None = None
    #: the first and last source commit time (``source.ts_ms``) of the batch's change rows, ISO 8601 UTC
    source_ts: dict[str, str] = field(default_factory=dict)

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
            "dead_lettered_by_partition": self.dead_by_partition,
            "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
            "transactions": self.transactions,
            "schema_cuts": self.schema_cuts,
            "discovery": self.discovery,
            "source_ts": self.source_ts,
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
    A pending quarantine release is applied even when there are no new records.

    Raises:
        SchemaEvolutionError: when a table's schema policy is ``fail`` and its schema changed.
        RecordSourceError: when records cannot be listed or read.
    """
    phases: dict[str, float] = {}
    timed = _Timer(phases)
    ledger = BatchLedger(spark, source.name)
    latest: dict[tuple[str, int], int] | None = None  # partition ends, known for fresh batches only
    planned: Future[datetime] | None = None  # the PLANNED row's commit, made while the batch is decoded
    with timed("plan"):
        # the quarantine states are read by Spark while the ledger is read by pyiceberg (the first Spark
        # catalog call of a fresh driver costs about 0.5 s)
        states = _BACKGROUND.submit(read_states, spark, source.name)
        ledger.ensure()
        committed, pending = ledger.last()
        quarantined = states.result()
        releases = [s for s in quarantined.values() if s.release is not None]
        # a discard release re-reads nothing: its held records go to the dead letters (_discard_held)
        replays = [s for s in releases if s.release is not None and s.release.action is not ReleaseAction.DISCARD]
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
            if not ranges and not releases:
                return BatchSummary(source=source.name, batch_id=None, status="no-new-records", phases=phases)
            batch_id = ledger.new_batch_id()
            seq = (committed.seq + 1) if committed else 1
            next_offsets = {**(committed.next_offsets if committed else {}), **end_offsets(ranges)}
            # committed in the background while the batch is read and decoded (read-only): it is waited for
            # before the first table commit, and before the error of a failed decoding is raised
            planned = _BACKGROUND.submit(
                ledger.append, BatchRecord(source.name, batch_id, seq, PLANNED, ranges, next_offsets)
            )
            redo = False
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
    try:
        decoded, raw = _read_and_decode(spark, source, records, ranges, replays, summary, timed)
    finally:
        if planned is not None:
            planned_at = planned.result()  # raises the commit's error, if any
            crash_point("planned")
    # the batch's own change rows, without released records (those belong to transactions decided earlier)
    own = (
        {t: f.where(within(ranges, "_cdc_topic", "_cdc_partition", "_cdc_offset")) for t, f in decoded.tables.items()}
        if replays
        else decoded.tables
    )
    blocked = _cuts_among_held(decoded, ranges) if replays else {}
    with timed("transactions"):
        # records from an incompatible schema change on are left to the next batch (decoder's schema cuts):
        # the partition's range ends there, for the transactions too
        schema_cuts = decoded.schema_cuts
        summary.schema_cuts = dict(decoded.schema_cut_reasons)
        for table_name, reason in decoded.schema_cut_reasons.items():
            logger.warning("source %s batch %s table %s: schema cut: %s", source.name, batch_id, table_name, reason)
        # the counts say which side outputs are empty: no Spark job is run for those below
        has = {name: summary.counts.get(name, 0) > 0 for name in ("transactions", "schema_changes", "dead_letters")}
        # tables none of whose rows carries a transaction id (seen by the counting pass) have nothing to gather
        stats = {t: decoded.table_stats(t) for t in own}
        summary.source_ts = _source_ts_range([s for s in stats.values() if s is not None])
        carrying = [f for t, f in own.items() if stats[t] is None or stats[t].transactional]
        tx_plan = decide(
            gather(carrying, decoded.transactions if has["transactions"] else None, source.signal_tables),
            cut_offsets(end_offsets(ranges), schema_cuts),
            now=planned_at,
            max_incomplete_age=timedelta(seconds=source.max_incomplete_age_s),
            enabled=source.transaction_consistent,
        )
        cuts = cut_offsets(tx_plan.cuts, schema_cuts)
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
            outcomes: list[ReleaseRecord] = []
            # before any outcome row: a redo finds the release still pending and does not copy twice
            discards = {
                s.table: _discard_held(spark, source, batch_id, s, ranges, redo) for s in releases if s not in replays
            }
            for table_id, frame in sorted(decoded.tables.items(), key=lambda kv: kv[0].name):
                info = decoded.table_info[table_id]
                applier = TableApplier(spark, info, source.lake_options(table_id), batch_props)
                # the counting pass observed the stats of all the table's decoded rows: they hold when every
                # one of them is applied (no cut in the table's topics, no released records among them)
                whole = not replays and not any(topic in info.topics for topic, _ in cuts)
                result, outcome = _apply_table(
                    spark,
                    source,
                    applier,
                    before_cuts(frame, cuts),
                    before_cuts(own[table_id], cuts),
                    # a discarded table takes its own events as if it had never been quarantined
                    None if applier.identifier in discards else quarantined.get(applier.identifier),
                    raw,
                    batch_id,
                    redo,
                    blocked.get(applier.identifier),
                    decoded.table_stats(table_id) if whole else None,
                )
                if applier.identifier in discards:
                    held, outcome = discards[applier.identifier]
                    result.released = {
                        "action": ReleaseAction.DISCARD.value,
                        "records": held.records,
                        "batches": list(held.batches),
                    }
                result.decoded = _decoded_ops(summary.counts, table_id)
                outcomes += [outcome] if outcome else []
                summary.tables[result.table] = result.as_dict()
                crash_point(f"table:{len(summary.tables)}")
                logger.info("source %s batch %s table %s: %s", source.name, batch_id, result.table, result.as_dict())
            for state in releases:
                if state.table in discards and state.table not in summary.tables:  # no event of its own
                    outcomes.append(discards[state.table][1])
                elif state.table not in summary.tables:  # no held record decoded as an event of the table
                    detail = "no held record decoded as a change event of the table (see cdc_audit.dead_letters)"
                    outcomes.append(state.outcome(batch_id, ReleaseStatus.APPLIED, detail))
            _append_audit_rows(spark, RELEASES, RELEASES_DDL, [o.row() for o in outcomes], batch_id, redo)
        with timed("dead-letters"):
            dead = before_cuts(decoded.dead_letters, cuts, "topic", "partition", "offset")
            dead_by_tp = _dead_letters(spark, source, batch_id, dead, redo) if has["dead_letters"] else {}
            summary.dead_lettered = sum(dead_by_tp.values())
            summary.dead_by_partition = {f"{t}/{p}": n for (t, p), n in sorted(dead_by_tp.items())}
            tables_of = {t: table_identifier(tid) for tid, i in decoded.table_info.items() for t in i.topics}
            for (topic, _), n in dead_by_tp.items():
                if tables_of.get(topic) in summary.tables:
                    summary.tables[tables_of[topic]]["dead_lettered"] += n
            _transactions_audit(spark, tx_plan, source, batch_id, redo)
        with timed("schema-audit"):
            ddls = table_ddls(decoded.schema_changes) if has["schema_changes"] else []
            data_columns = {
                f"{tid.namespace}.{tid.table}": [f.name for f in decoded.table_info[tid].schema.fields]
                for tid in decoded.tables
            }
            names = {f"{tid.namespace}.{tid.table}": tid for tid in decoded.tables}
            first_positions = {}
            for ddl_table in {d.table for d in ddls} & set(names):
                top = own[names[ddl_table]].agg(F.min("_cdc_position").alias("p")).collect()[0]["p"]
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
        crash_point("before-commit")
        with timed("commit"):
            ledger.append(BatchRecord(source.name, batch_id, seq, COMMITTED, ranges, next_offsets), summary.as_dict())
        crash_point("after-commit")
    finally:
        decoded.release()
        raw.unpersist()
    return summary


def _read_and_decode(
    spark: SparkSession,
    source: SourceConfig,
    records: RecordSource,
    ranges: list[OffsetRange],
    replays: list[QuarantineState],
    summary: BatchSummary,
    timed: _Timer,
) -> tuple[DecodedBatch, DataFrame]:
    """The batch's records (with the held records of the tables being released) and their decoding, counted
    into ``summary``: (decoded batch, records)."""
    with timed("read+decode"):
        raw = records.read(spark, ranges) if ranges else spark.createDataFrame([], STRING_RECORD_SCHEMA)
        # cached as text (unless the source is cheaper to read again, see RecordSource.cache_records): every
        # pass (discovery, decoding, transactions, dead letters) reads it without a cast
        raw = normalise_records(raw)
        if replays:
            raw = raw.unionByName(held_records(spark, source.name, replays, ranges))
        if records.cache_records:
            raw = raw.persist()
        # each table's rows are decoded once, at the first count, and read from the cache by every later phase
        # discovery samples the source's own ranges; held records (not in them) are found by a pass instead
        sampler = None
        if ranges and not replays:
            # the source's own sampler (Kafka: single-record reads), else one filter over the cached records
            sampler = records.sampler(spark, ranges) or (FrameSampler(raw, ranges) if records.cache_records else None)
        decoded, summary.counts = decode_counted(raw, options=source.decode_options(), sampler=sampler)
        summary.discovery = decoded.discovery
    return decoded, raw


def _apply_table(
    spark: SparkSession,
    source: SourceConfig,
    applier: TableApplier,
    frame: DataFrame,
    own: DataFrame,
    state: QuarantineState | None,
    raw: DataFrame,
    batch_id: str,
    redo: bool,
    blocked: str | None = None,
    stats: TableStats | None = None,
) -> tuple[TableResult, ReleaseRecord | None]:
    """Apply one table's events; hold them when it is quarantined; apply its pending release.

    Args:
        frame: the table's change rows of the batch (released held records included).
        own: the same without released held records (what is held if the table is quarantined).
        state: the table's quarantine state, if it is quarantined.
        blocked: why its pending release cannot be applied in this batch (see :func:`_cuts_among_held`).
        stats: the :class:`TableStats` of ``frame``, when known.

    Returns:
        The table's result and, when a release was pending, its outcome row.

    Raises:
        SchemaEvolutionError: when the table's schema policy is ``fail`` and its schema changed.
    """
    identifier, mode = applier.identifier, applier.options.mode.value
    if state is not None and state.release is None:
        result = TableResult(table=identifier, mode=mode, quarantined=state.reason)
        result.events = _quarantine(spark, source, batch_id, identifier, own, raw, state.reason, redo)
        logger.warning(
            "source %s batch %s: %s is quarantined since batch %s; its events are held until it is released "
            "(cdclake quarantine release %s --action evolve|recreate|discard)",
            source.name,
            batch_id,
            identifier,
            state.batches[0],
            identifier,
        )
        return result, None
    release = state.release if state is not None else None
    if state is not None and release is not None and blocked is not None:
        result = TableResult(table=identifier, mode=mode, quarantined=state.reason)
        result.events = _quarantine(spark, source, batch_id, identifier, own, raw, state.reason, redo)
        detail = (
            f"{blocked}: its held records cannot be replayed in one batch; the table stays quarantined "
            f"(release it with --action {ReleaseAction.DISCARD.value} to dead-letter them, then re-snapshot it)"
        )
        logger.error("source %s batch %s: release of %s failed: %s", source.name, batch_id, identifier, detail)
        return result, state.outcome(batch_id, ReleaseStatus.FAILED, detail)
    if release is not None:
        if release.action is ReleaseAction.RECREATE:
            applier.set_aside(replaced_suffix(batch_id))
        else:
            applier.options = applier.options.model_copy(update={"schema_policy": SchemaPolicy.EVOLVE})
    try:
        result = applier.apply(frame, batch_id, redo=redo, stats=stats)
    except SchemaEvolutionError as exc:
        if release is None and applier.options.schema_policy is SchemaPolicy.FAIL:
            raise
        result = TableResult(table=identifier, mode=mode, quarantined=str(exc))
        result.events = _quarantine(spark, source, batch_id, identifier, own, raw, str(exc), redo)
        logger.error("QUARANTINED %s: %s", identifier, exc)
        if state is None:
            return result, None
        return result, state.outcome(batch_id, ReleaseStatus.FAILED, f"{exc}; {release_hint(state)}")
    if state is None or release is None:
        return result, None
    result.released = {"action": release.action.value, "records": state.records, "batches": list(state.batches)}
    logger.warning(
        "source %s batch %s: released %s (%s): %d held records re-read",
        source.name,
        batch_id,
        identifier,
        release.action.value,
        state.records,
    )
    return result, state.outcome(batch_id, ReleaseStatus.APPLIED)


def _cuts_among_held(decoded: DecodedBatch, ranges: list[OffsetRange]) -> dict[str, str]:
    """Schema cuts the decoder made among released held records, before the batch's own records.

    The ledger must never go back: such a cut moves to the start of the batch's range in its
    partition (or is dropped when the batch read nothing there). The records after it were left out
    of the decoded tables, so the releases of those tables cannot be applied in this batch.

    Returns:
        Why, per lake identifier of the tables concerned.
    """
    starts = {(r.topic, r.partition): r.start for r in ranges}
    among_held = {tp: off for tp, off in decoded.schema_cuts.items() if tp not in starts or off < starts[tp]}
    for tp in among_held:
        if tp in starts:
            decoded.schema_cuts[tp] = starts[tp]
        else:
            del decoded.schema_cuts[tp]
    return {
        table_identifier(tid): f"the held records change schema incompatibly at {topic}/{partition} offset {offset}"
        for tid, info in decoded.table_info.items()
        for (topic, partition), offset in sorted(among_held.items())
        if topic in info.topics
    }


def _decoded_ops(counts: dict[str, int], table_id: TableId) -> dict[str, int]:
    """Events decoded per op of one table, from :meth:`DecodedBatch.counts` (``data:<name>:<op>``)."""
    prefix = f"data:{table_id.name}:"
    return {key[len(prefix) :]: n for key, n in counts.items() if key.startswith(prefix)}


def _source_ts_range(stats: list[TableStats]) -> dict[str, str]:
    """``{"first", "last"}`` source commit times of the batch's change rows (UTC, ISO 8601), empty without any."""
    first = [s.source_ts_first for s in stats if s.source_ts_first is not None]
    last = [s.source_ts_last for s in stats if s.source_ts_last is not None]
    if not first or not last:
        return {}
    # PySpark returns TIMESTAMP values as naive datetimes in the process's local time zone
    return {"first": min(first).astimezone(UTC).isoformat(), "last": max(last).astimezone(UTC).isoformat()}


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
    """Append ``rows`` (plus ``recorded_at``) to ``lake.cdc_audit.<name>`` once per batch (through pyiceberg:
    a few rows, see :mod:`cdclake.lake.rows`; the table is created with its Spark DDL the first time)."""
    if not rows:
        return
    table = audit_table(name)
    existing = lake_rows.load(spark, table)
    if existing is None:
        _audit_ddl(spark, name, ddl)
    elif redo and lake_rows.committed_by(existing, batch_id):
        return
    lake_rows.append_rows(spark, table, rows, batch_id=batch_id, recorded_at=True)


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


def _dead_letters(
    spark: SparkSession, source: SourceConfig, batch_id: str, dead: DataFrame, redo: bool
) -> dict[TopicPartition, int]:
    """Write the batch's dead letters once; returns their number per topic-partition."""
    per_tp = {
        (r["topic"], int(r["partition"])): int(r["count"]) for r in dead.groupBy("topic", "partition").count().collect()
    }
    count = sum(per_tp.values())
    if not count:
        return {}
    table = _audit_ddl(spark, "dead_letters", DEAD_LETTERS_DDL)
    if _already(spark, table, batch_id, redo):
        return per_tp
    out = _dead_letter_rows(source, batch_id, dead, F.col("reason"))
    out.writeTo(table).option("snapshot-property.cdc.batch-id", batch_id).append()
    logger.warning("source %s batch %s: %d records dead-lettered into %s", source.name, batch_id, count, table)
    return per_tp


def _dead_letter_rows(source: SourceConfig, batch_id: str, records: DataFrame, reason: Column) -> DataFrame:
    """Kafka records (``topic, partition, offset, key, value``) as rows of ``cdc_audit.dead_letters``."""
    return records.select(
        F.lit(source.name).alias("source"),
        F.lit(batch_id).alias("batch_id"),
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        reason.alias("reason"),
        F.current_timestamp().alias("recorded_at"),
    )


def _discard_held(
    spark: SparkSession,
    source: SourceConfig,
    batch_id: str,
    state: QuarantineState,
    ranges: list[OffsetRange],
    redo: bool,
) -> tuple[QuarantineState, ReleaseRecord]:
    """A ``discard`` release: copy the table's held records to ``cdc_audit.dead_letters`` (once per batch).

    Returns:
        The held batches it released (never the running batch: in a redo, records this batch held itself
        stay held) and the release's outcome row.
    """
    dead_letters = f"{CATALOG_NAME}.{AUDIT_NAMESPACE}.dead_letters"
    held = replace(state, held=tuple(h for h in state.held if h.batch_id != batch_id))
    records = held_records(spark, source.name, [held], ranges) if held.held else None
    count = records.count() if records is not None else 0
    if records is not None and count:
        table = _audit_ddl(spark, "dead_letters", DEAD_LETTERS_DDL)
        if not _already(spark, table, f"{batch_id}:discard:{state.table}", redo):
            _dead_letter_rows(source, batch_id, records, F.lit(discard_reason(state))).writeTo(table).option(
                "snapshot-property.cdc.batch-id", f"{batch_id}:discard:{state.table}"
            ).append()
    logger.warning(
        "source %s batch %s: release %s of %s discards %d held records into %s",
        source.name,
        batch_id,
        state.release.release_id if state.release else "-",
        state.table,
        count,
        dead_letters,
    )
    detail = f"{count} held record(s) discarded into {dead_letters}"
    return held, held.outcome(batch_id, ReleaseStatus.APPLIED, detail)


def _quarantine(
    spark: SparkSession,
    source: SourceConfig,
    batch_id: str,
    identifier: str,
    frame: DataFrame,
    raw: DataFrame,
    reason: str,
    redo: bool = True,
) -> dict[str, int]:
    """Hold the records of ``frame`` in ``cdc_audit.quarantine`` (once per batch and table).

    Returns:
        The held events per op.
    """
    events = {r["_cdc_op"]: int(r["count"]) for r in frame.groupBy("_cdc_op").count().collect()}
    if not events:
        return events
    table = _audit_ddl(spark, QUARANTINE, QUARANTINE_DDL)
    add_missing_columns(spark, table, QUARANTINE_ADDED_COLUMNS)
    if _already(spark, table, batch_id + ":" + identifier, redo):
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
        "timestamp",
        "headers",
    )
    held.writeTo(table).option("snapshot-property.cdc.batch-id", batch_id + ":" + identifier).append()
    return events
