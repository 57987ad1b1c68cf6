"""Decode phase: the batch's records as change rows per table and side outputs, counted."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdclake.decode import decode_counted
from cdclake.ingest import tables
from cdclake.ingest.offsets import OffsetRange, TopicPartition, within
from cdclake.lake.names import table_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdclake.decode import DecodeCounts, DecodedBatch, TableId
    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.plan import BatchPlan
    from cdclake.ingest.batch.read import BatchRecords

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchDecoded:
    """The decoded batch.

    Attributes:
        batch: the decoder's output (change rows per table, side outputs, schema cuts).
        counts: records per category and events per table and op.
        own: each table's change rows without released held records (those belong to transactions decided
            in earlier batches); the same frames as ``batch.tables`` when nothing is released.
        schema_cuts: where each partition's range ends because of an incompatible schema change, never
            before the batch's own start (see :func:`cuts_among_held`).
        blocked: why a table's pending release cannot be applied in this batch, by lake identifier.
    """

    batch: DecodedBatch
    counts: DecodeCounts
    own: dict[TableId, DataFrame]
    schema_cuts: dict[TopicPartition, int]
    blocked: dict[str, str]

    def has(self, category: str) -> bool:
        """Whether the decoder counted any record of ``category`` (no Spark job is run for an empty one)."""
        return self.counts[category] > 0


def decode_batch(ctx: BatchContext, plan: BatchPlan, records: BatchRecords) -> BatchDecoded:
    """Decode ``records`` with the source's options; each table is decoded once, at the counting pass, and
    read from the cache by every later phase.

    The counting pass also observes what bounds each table's keys, for the apply phase's scans: their least and
    greatest values and, in a batch of up to :data:`cdclake.ingest.tables.KEY_VALUES_MAX_RECORDS` records that
    releases no held records, their distinct values.
    """
    with ctx.timed("read+decode"):
        ctx.source.schema_source.begin_batch()
        decoded, counts = decode_counted(
            records.frame,
            options=ctx.source.decode_options(),
            sampler=records.sampler,
            key_values=not plan.replays and plan.records <= tables.KEY_VALUES_MAX_RECORDS,
        )
    for table_name, reason in decoded.schema_cut_reasons.items():
        logger.warning("source %s batch %s table %s: schema cut: %s", ctx.name, plan.batch_id, table_name, reason)
    if not plan.replays:
        return BatchDecoded(decoded, counts, dict(decoded.tables), dict(decoded.schema_cuts), {})
    own = {
        t: f.where(within(plan.ranges, "_cdc_topic", "_cdc_partition", "_cdc_offset"))
        for t, f in decoded.tables.items()
    }
    cuts, blocked = cuts_among_held(decoded, plan.ranges)
    return BatchDecoded(decoded, counts, own, cuts, blocked)


def cuts_among_held(
    decoded: DecodedBatch, ranges: list[OffsetRange]
) -> tuple[dict[TopicPartition, int], dict[str, str]]:
    """The decoder's schema cuts, with those among released held records (before the batch's own records)
    moved to the start of the batch's range in their partition, or dropped when the batch read nothing
    there: the ledger never goes back. The records after such a cut were left out of the decoded tables,
    so the releases of those tables cannot be applied in this batch.

    Returns:
        The schema cuts, and why a release is blocked per lake identifier of the tables concerned.
    """
    starts = {(r.topic, r.partition): r.start for r in ranges}
    among_held = {tp: off for tp, off in decoded.schema_cuts.items() if tp not in starts or off < starts[tp]}
    cuts = {tp: off for tp, off in decoded.schema_cuts.items() if tp not in among_held}
    cuts.update({tp: starts[tp] for tp in among_held if tp in starts})
    blocked = {
        table_identifier(tid): f"the held records change schema incompatibly at {topic}/{partition} offset {offset}"
        for tid, info in decoded.table_info.items()
        for (topic, partition), offset in sorted(among_held.items())
        if topic in info.topics
    }
    return cuts, blocked
