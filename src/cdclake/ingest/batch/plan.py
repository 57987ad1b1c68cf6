"""Plan phase: the offset ranges of the batch, from the ledger's last rows and the source's watermarks.

A batch interrupted earlier (PLANNED but never COMMITTED) is redone with the same ranges. Otherwise the
batch runs from the committed ``next_offsets`` to the source's current end (at most ``max_records``), and
its PLANNED row is committed in the background while the batch is read and decoded.

A batch the cap cuts is read up to a point of the source's order, ``capped_at``: the Kafka timestamp every
partition is cut at (:func:`~cdclake.ingest.offsets.cap_at_time`), or, where the source cannot cut by time or the
records of one millisecond exceed the cap (the cap then shared out in proportion), the earliest timestamp of the
capped partitions' last records. The ages of the transactions the cut may leave short are measured up to it
(never past the planning time; :func:`~cdclake.ingest.transactions.decide`): records after the cut may still
complete such a transaction, however old it is, so it is held, not expired. The PLANNED row keeps it for a redo.

Kafka's log must still hold the offsets the batch starts from: a gap (records deleted before they were
ingested, a topic re-created or truncated) stops the batch before anything is read, unless the run accepts it
(:class:`~cdclake.ingest.offsets.GapAcceptance`); see :mod:`cdclake.ingest.offsets`.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from cdclake.ingest.batch.context import BACKGROUND, BatchContext
from cdclake.ingest.faults import crash_point
from cdclake.ingest.ledger import PLANNED, BatchRecord
from cdclake.ingest.offsets import (
    AcceptedGap,
    GapAcceptance,
    OffsetRange,
    RangePlan,
    TopicPartition,
    plan_ranges,
    planned_gaps,
    redo_ranges,
)
from cdclake.ingest.quarantine import QuarantineState, ReleaseAction, read_states
from cdclake.lake import rows as lake_rows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPlan:
    """What a batch reads and where the source continues after it.

    Attributes:
        ranges: the offset range of every topic-partition read.
        next_offsets: where the next batch starts, before any transaction or schema cut.
        redo: a batch interrupted earlier, redone with its planned ranges.
        quarantined: the quarantine state of each quarantined table (by lake identifier).
        latest: the partitions' end offsets when planned (None for a redo).
        planned: the PLANNED row's commit, made while the batch is read (None for a redo).
        planned_at: when the batch was planned (set for a redo; after :func:`wait_planned` otherwise).
        accepted_gaps: the gaps the batch starts past, accepted by the run (``--accept-gap``); for a redo, also
            those the interrupted run accepted.
        capped: whether ``max_records`` cut the batch short of a partition's end (for a redo: whether the
            interrupted run recorded a ``capped_at``).
        capped_at: for a batch ``max_records`` cut, the point of the source's order it was read to (module
            docstring; naive local time, as ``planned_at``); None when every partition is read to its end.
    """

    batch_id: str
    seq: int
    ranges: list[OffsetRange]
    next_offsets: dict[TopicPartition, int]
    redo: bool
    quarantined: dict[str, QuarantineState]
    latest: dict[TopicPartition, int] | None = None
    planned: Future[datetime] | None = None
    planned_at: datetime | None = None
    accepted_gaps: tuple[AcceptedGap, ...] = ()
    capped: bool = False
    capped_at: datetime | None = None

    @property
    def releases(self) -> list[QuarantineState]:
        """Quarantined tables with a pending release."""
        return [s for s in self.quarantined.values() if s.release is not None]

    @property
    def replays(self) -> list[QuarantineState]:
        """Pending releases that re-read their held records (a discard reads nothing: they are dead-lettered)."""
        return [s for s in self.releases if s.release is not None and s.release.action is not ReleaseAction.DISCARD]

    @property
    def records(self) -> int:
        return sum(r.count for r in self.ranges)


def plan_batch(ctx: BatchContext, max_records: int | None = None) -> BatchPlan | None:
    """The batch to run, or None when there are neither new records, nor accepted gaps, nor pending releases.

    The gaps the source's config accepts (:attr:`~cdclake.ingest.config.SourceConfig.accept_gaps`, ``--accept-gap``) start at their
    log start; a batch runs for them even when there is nothing to read, so that the ledger moves past the gap
    and records it.

    Raises:
        OffsetGapError: when the log of a topic-partition no longer holds the offset the batch starts from
            (or, for a redo, its planned range) and the run does not accept it: no batch is planned, nothing is read.
        RecordSourceError: when the source's watermarks cannot be read.
    """
    with ctx.timed("plan"):
        plan = _plan(ctx, max_records, ctx.source.accept_gaps)
    if plan is not None:
        logger.info(
            "source %s batch %s: %d records in %d partitions", ctx.name, plan.batch_id, plan.records, len(plan.ranges)
        )
    return plan


def _plan(ctx: BatchContext, max_records: int | None, accept: GapAcceptance) -> BatchPlan | None:
    # the quarantine states are read by Spark while the ledger is read by pyiceberg (the first Spark catalog
    # call of a fresh driver is the slower of the two)
    states = BACKGROUND.submit(read_states, ctx.spark, ctx.name)
    ctx.ledger.ensure()
    committed, pending = ctx.ledger.last()
    quarantined = states.result()
    start = committed.next_offsets if committed else {}
    log_bounds = ctx.records.log_bounds
    if pending is not None:
        logger.warning("source %s: redoing interrupted batch %s", ctx.name, pending.batch_id)
        planned_at = pending.recorded_at or datetime.now()
        # the gaps the interrupted run accepted (its ledger rows say where it started), then the records its
        # ranges lost since
        earlier = planned_gaps(start, pending.ranges, pending.next_offsets) if log_bounds else []
        redo = RangePlan(pending.ranges)
        if log_bounds:
            earliest, latest = ctx.records.watermarks()
            redo = redo_ranges(pending.ranges, pending.next_offsets, earliest, latest, accept=accept, source=ctx.name)
        gaps = _accepted(ctx, redo, accept)
        return BatchPlan(
            batch_id=pending.batch_id,
            seq=pending.seq,
            ranges=redo.ranges,
            next_offsets=redo.next_offsets(pending.next_offsets),
            redo=True,
            quarantined=quarantined,
            planned_at=planned_at,
            accepted_gaps=tuple(AcceptedGap(g, None, planned_at.astimezone(UTC)) for g in earlier) + gaps,
            capped=pending.capped_at is not None,
            capped_at=pending.capped_at,
        )
    earliest, latest = ctx.records.watermarks()
    with ctx.records.offsets_by_time(sorted(latest)) as offsets_at:
        wanted = plan_ranges(
            start, earliest, latest, max_records, accept=accept, log_bounds=log_bounds, source=ctx.name,
            offsets_at=offsets_at,
        )  # fmt: skip
    ranges = wanted.ranges
    if not ranges and not wanted.gaps and not any(s.release is not None for s in quarantined.values()):
        return None
    gaps = _accepted(ctx, wanted, accept)
    batch_id = ctx.ledger.new_batch_id()
    seq = (committed.seq + 1) if committed else 1
    next_offsets = wanted.next_offsets(start)
    capped_at = _capped_at(ctx, wanted)
    # committed in the background while the batch is read and decoded (read-only): it is waited for
    # before the first table commit, and before the error of a failed decoding is raised
    planned = BACKGROUND.submit(
        ctx.ledger.append, BatchRecord(ctx.name, batch_id, seq, PLANNED, ranges, next_offsets, capped_at=capped_at)
    )
    return BatchPlan(
        batch_id,
        seq,
        ranges,
        next_offsets,
        False,
        quarantined,
        latest=latest,
        planned=planned,
        accepted_gaps=gaps,
        capped=bool(wanted.capped),
        capped_at=capped_at,
    )


def _capped_at(ctx: BatchContext, wanted: RangePlan) -> datetime | None:
    """The point of the source's order a capped batch is read to (module docstring), naive local time."""
    if not wanted.capped:
        return None
    at = wanted.capped_at
    if at is None:
        capped = set(wanted.capped)
        at = ctx.records.last_timestamp(ctx.spark, [r for r in wanted.ranges if (r.topic, r.partition) in capped])
    if at is not None:
        logger.info("source %s: the cap cuts %s at %s", ctx.name, [f"{t}/{p}" for t, p in wanted.capped], at)
    return lake_rows.local_time(at)


def _accepted(ctx: BatchContext, planned: RangePlan, accept: GapAcceptance) -> tuple[AcceptedGap, ...]:
    """The gaps ``planned`` accepted, each logged as a warning, with who accepted them and now."""
    by = accept.accepted_by
    now = datetime.now(UTC)
    for gap in planned.gaps:
        logger.warning(
            "source %s: gap accepted by %s (--accept-gap %s): %s; continuing at offset %d",
            ctx.name,
            by,
            gap.acceptance,
            gap.describe(),
            gap.log_start,
        )
    return tuple(AcceptedGap(g, by, now) for g in planned.gaps)


def wait_planned(plan: BatchPlan) -> BatchPlan:
    """The plan once its PLANNED row is committed (raises that commit's error, if any)."""
    if plan.planned is None:
        return plan
    planned_at = plan.planned.result()
    crash_point("planned")
    return replace(plan, planned=None, planned_at=planned_at)
