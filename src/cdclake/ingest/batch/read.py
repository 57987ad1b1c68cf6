"""Read phase: the batch's records, with the held records of the tables being released."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdclake.decode import STRING_RECORD_SCHEMA
from cdclake.decode.records import normalise_records
from cdclake.ingest.quarantine import held_records
from cdclake.ingest.sources import FrameSampler

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdclake.decode import RecordSampler
    from cdclake.ingest.batch.context import BatchContext
    from cdclake.ingest.batch.plan import BatchPlan
    from cdclake.ingest.offsets import OffsetRange
    from cdclake.ingest.sources import RecordSource


@dataclass(frozen=True)
class BatchRecords:
    """The records of a batch as text (``topic, partition, offset, key, value, ...``), and how discovery
    samples them (None: by a pass over all of them).

    ``frame`` is what the batch decodes: from Kafka without the records' headers, which the ingestion job does
    not use (the primary-key move headers' ``_cdc_old_key``/``_cdc_new_key`` are null, and ``invalid_header`` is
    not checked). :attr:`whole` is the planned ranges' records with their headers, for holding a quarantined
    table's records as they were, made by ``read_whole`` when first used (planning a read of Kafka's records costs
    the driver about 0.08 s of a small batch).
    """

    frame: DataFrame
    sampler: RecordSampler | None
    read_whole: Callable[[], DataFrame]

    @functools.cached_property
    def whole(self) -> DataFrame:
        """The planned ranges' records with their headers (lazy: Spark reads them only if a table is held)."""
        return self.read_whole()

    def release(self) -> None:
        self.frame.unpersist()


def read_records(ctx: BatchContext, plan: BatchPlan) -> BatchRecords:
    """The planned ranges' records (lazy), cached unless the source is cheaper to read again."""
    with ctx.timed("read+decode"):
        spark, records = ctx.spark, ctx.records
        # cached as text: every pass (discovery, decoding, transactions, dead letters) reads it without a cast
        if not plan.ranges:
            raw = spark.createDataFrame([], STRING_RECORD_SCHEMA)
            read_whole = _given(raw)
        elif records.cache_records:
            raw = normalise_records(records.read(spark, plan.ranges))
            read_whole = _given(raw)
        else:
            raw = normalise_records(records.read(spark, plan.ranges, False))
            read_whole = functools.partial(_read_with_headers, records, spark, plan.ranges)
        replays = plan.replays
        if replays:
            raw = raw.unionByName(held_records(spark, ctx.name, replays, plan.ranges))
        if records.cache_records:
            raw = raw.persist()
        # discovery samples the source's own ranges; held records (not in them) are found by a pass instead
        sampler = None
        if plan.ranges and not replays:
            # the source's own sampler (Kafka: single-record reads), else one filter over the cached records
            sampler = records.sampler(spark, plan.ranges) or (
                FrameSampler(raw, plan.ranges) if records.cache_records else None
            )
        return BatchRecords(raw, sampler, read_whole)


def _given(frame: DataFrame) -> Callable[[], DataFrame]:
    return lambda: frame


def _read_with_headers(records: RecordSource, spark: SparkSession, ranges: list[OffsetRange]) -> DataFrame:
    return normalise_records(records.read(spark, ranges))
