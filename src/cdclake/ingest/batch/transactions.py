"""Transactions phase: which transactions the batch applies, and where each partition's range ends.

Records of a transaction not yet complete (no END, or fewer events than its END counts) are held: the
partition's range ends before them, and the next batch reads them again. So do records from an incompatible
schema change on (the decoder's schema cuts). See :mod:`cdclake.ingest.transactions`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cdclake.ingest.offsets import GapKind, TopicPartition, end_offsets, ranges_to_json
from cdclake.ingest.transactions import (
    LostRecords,
    TxPlan,
    TxStatus,
    collection_name,
    cut_offsets,
    decide,
    facts_part_rows,
    gather,
    group_by_status,
)
from cdclake.lake import audit
from cdclake.spark import driver_max_heap

if TYPE_CHECKING:
    from cdclake.decode.batch import TableStats
    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.decode import BatchDecoded
    from cdclake.ingest.batch.plan import BatchPlan

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxDecision:
    """What the batch applies.

    Attributes:
        plan: every transaction of the batch with its status.
        cuts: per partition, the first offset left to the next batch (transactions held, schema cuts).
        next_offsets: where the next batch starts.
        commit_properties: what every table commit of the batch carries in its snapshot summary.
        aged_to: what the ages of the transactions the batch's records may still complete were measured up to:
            the planning time, or the point a cap cut the batch at when earlier (:func:`decide`'s ``capped_at``).
    """

    plan: TxPlan
    cuts: dict[TopicPartition, int]
    next_offsets: dict[TopicPartition, int]
    commit_properties: dict[str, str]
    held_everything: bool
    source_ts: dict[str, str]
    aged_to: datetime | None = None

    def summary(self) -> dict[str, Any]:
        """The ``transactions`` part of the batch summary."""
        frontier = self.plan.frontier()
        grouped = group_by_status(self.plan)
        return {
            "mode": "consistent" if self.plan.enabled else "off",
            "counts": self.plan.counts(),
            "ids": {k: sorted(v)[:50] for k, v in grouped.items() if k not in ("complete", "empty")},
            "cuts": {f"{t}/{p}": off for (t, p), off in sorted(self.plan.cuts.items())},
            "frontier": None if frontier is None else {"tx": frontier.key, "position": frontier.position},
            "aged_to": None if self.aged_to is None else self.aged_to.astimezone(UTC).isoformat(),
        }


def decide_transactions(ctx: BatchContext, plan: BatchPlan, decoded: BatchDecoded) -> TxDecision:
    """Gather the transactions of the batch's change rows and metadata records, and decide each."""
    source = ctx.source
    with ctx.timed("transactions"):
        # tables none of whose rows carries a transaction id (seen by the counting pass) have nothing to gather
        stats = {t: decoded.batch.table_stats(t) for t in decoded.own}
        carrying = [f for t, f in decoded.own.items() if stats[t] is None or stats[t].transactional]
        metadata = decoded.batch.transactions if decoded.has("transactions") else None
        # how many rows there are to gather (at most), when every table's were counted: a small batch's are
        # folded in Python
        known = [s.transactional for s in stats.values() if s is not None]
        rows = sum(known) + decoded.counts["transactions"] if len(known) == len(stats) else None
        assert plan.planned_at is not None, "the PLANNED row is committed before transactions are decided"
        lost = lost_records(plan, decoded)
        infos, settled = gather(
            carrying,
            metadata,
            source.signal_tables,
            settle=not lost,
            rows=rows,
            part_rows=lambda: facts_part_rows(driver_max_heap(ctx.spark)),  # a large batch's parts fit the heap
        )
        tx_plan = decide(
            infos,
            cut_offsets(end_offsets(plan.ranges), decoded.schema_cuts),
            now=plan.planned_at,
            max_incomplete_age=timedelta(seconds=source.max_incomplete_age_s),
            enabled=source.transaction_consistent,
            applied_before=lambda keys: audit.applied_transactions(
                ctx.spark, ctx.name, keys, except_batch=plan.batch_id
            ),
            lost=lost,
            settled=settled,
            capped_at=plan.capped_at,
        )
        _log_applied_incomplete(ctx, plan, tx_plan)
        cuts = cut_offsets(tx_plan.cuts, decoded.schema_cuts)
        if cuts:
            logger.info(
                "source %s batch %s: holding %d incomplete transactions; partitions cut at %s",
                ctx.name,
                plan.batch_id,
                len(tx_plan.held),
                cuts,
            )
        return TxDecision(
            plan=tx_plan,
            cuts=cuts,
            next_offsets=cut_offsets(plan.next_offsets, cuts),
            commit_properties=_commit_properties(ctx.name, plan, tx_plan),
            held_everything=bool(cuts) and all(cuts.get((r.topic, r.partition), r.end) <= r.start for r in plan.ranges),
            source_ts=_source_ts_range([s for s in stats.values() if s is not None]),
            aged_to=plan.planned_at if plan.capped_at is None else min(plan.planned_at, plan.capped_at),
        )


def lost_records(plan: BatchPlan, decoded: BatchDecoded) -> list[LostRecords]:
    """The records lost in the batch's accepted gaps, each with the data collections of its topic (the decoded
    tables read from it; else the topic's last two parts, Debezium's ``<prefix>.<schema>.<table>``)."""
    out = []
    for accepted in plan.accepted_gaps:
        g = accepted.gap
        collections = frozenset(
            collection_name(f"{tid.namespace}.{tid.table}")
            for tid, info in decoded.batch.table_info.items()
            if g.topic in info.topics
        ) or frozenset({collection_name(g.topic)})
        count = g.log_start - g.committed if g.kind is GapKind.DELETED else None
        out.append(LostRecords((g.topic, g.partition), collections, count))
    return out


def _log_applied_incomplete(ctx: BatchContext, plan: BatchPlan, tx_plan: TxPlan) -> None:
    for t in tx_plan.transactions.values():
        if t.status is TxStatus.REDELIVERED:
            logger.info(
                "source %s batch %s: transaction %s was applied by an earlier batch; its %d redelivered events "
                "(END %s) are applied again (the lake keeps any newer row)",
                ctx.name,
                plan.batch_id,
                t.key,
                sum(t.observed.values()),
                "seen" if t.end_seen else "not seen",
            )
        elif t.status is TxStatus.GAP:
            logger.warning(
                "source %s batch %s: transaction %s lost events in an accepted gap (END counts %s, the log holds "
                "%s); applied as it is",
                ctx.name,
                plan.batch_id,
                t.key,
                t.expected,
                t.observed,
            )


def _commit_properties(source: str, plan: BatchPlan, tx_plan: TxPlan) -> dict[str, str]:
    props = {"cdc.batch-id": plan.batch_id, "cdc.source": source, "cdc.offsets": ranges_to_json(plan.ranges)}
    frontier = tx_plan.frontier()
    if frontier is not None:
        props["cdc.frontier"] = json.dumps(
            {"batch_id": plan.batch_id, "tx": frontier.key, "position": frontier.position}, separators=(",", ":")
        )
    return props


def _source_ts_range(stats: list[TableStats]) -> dict[str, str]:
    """``{"first", "last"}`` source commit times of the batch's change rows (UTC, ISO 8601), empty without any."""
    first = [s.source_ts_first for s in stats if s.source_ts_first is not None]
    last = [s.source_ts_last for s in stats if s.source_ts_last is not None]
    if not first or not last:
        return {}
    # PySpark returns TIMESTAMP values as naive datetimes in the process's local time zone
    return {"first": min(first).astimezone(UTC).isoformat(), "last": max(last).astimezone(UTC).isoformat()}
