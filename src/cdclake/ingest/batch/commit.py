"""Commit phase: the batch's summary assembled from its phases' results, and the ledger's COMMITTED row.

The COMMITTED row is the batch's last write: once it is in the ledger, the next batch starts at its
``next_offsets``. A crash before it makes the next run redo the batch (:mod:`cdclake.ingest.ledger`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cdclake.ingest.faults import crash_point
from cdclake.ingest.ledger import COMMITTED, BatchRecord
from cdclake.ingest.offsets import ranges_to_json
from cdclake.ingest.summary import COMMITTED_STATUS, BatchSummary

if TYPE_CHECKING:
    from cdclake.ingest.batch.apply import Applied
    from cdclake.ingest.batch.audit import Audited
    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.decode import BatchDecoded
    from cdclake.ingest.batch.plan import BatchPlan
    from cdclake.ingest.batch.transactions import TxDecision


def summarise(
    ctx: BatchContext, plan: BatchPlan, decoded: BatchDecoded, tx: TxDecision, applied: Applied, audited: Audited
) -> BatchSummary:
    """What the batch did, from every phase's result."""
    tables = {name: result.as_dict() for name, result in applied.tables.items()}
    for name, n in audited.dead_by_table.items():
        tables[name]["dead_lettered"] += n
    return BatchSummary(
        source=ctx.name,
        batch_id=plan.batch_id,
        status=COMMITTED_STATUS,
        ranges=json.loads(ranges_to_json(plan.ranges)),
        records=plan.records,
        counts=decoded.counts.as_dict(),
        tables=tables,
        dead_letters=audited.dead_letters,
        phases=ctx.phases,
        redo=plan.redo,
        transactions=tx.summary(),
        held_everything=tx.held_everything,
        capped=plan.capped,
        schema_problems=audited.schema_problems,
        schema_cuts=dict(decoded.batch.schema_cut_reasons),
        discovery=decoded.batch.discovery,
        source_ts=tx.source_ts,
        accepted_gaps=[g.as_dict() for g in plan.accepted_gaps],
    )


def commit_batch(ctx: BatchContext, plan: BatchPlan, tx: TxDecision, summary: BatchSummary) -> BatchSummary:
    """Append the COMMITTED row (with the summary) to the ledger."""
    crash_point("before-commit")
    with ctx.timed("commit"):
        record = BatchRecord(
            ctx.name, plan.batch_id, plan.seq, COMMITTED, plan.ranges, tx.next_offsets, capped_at=plan.capped_at
        )
        ctx.ledger.append(record, summary.as_dict())
    crash_point("after-commit")
    return summary
