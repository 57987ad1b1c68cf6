"""One ingestion batch of one source, as a sequence of phases, each a module of this package:

plan -> read -> decode -> transactions -> apply -> audit -> commit

Each phase takes the batch's fixed inputs (:class:`~cdclake.ingest.batch.context.BatchContext`) and the
earlier phases' results, and returns its own immutable result. Exactly-once: the ledger
(:mod:`cdclake.ingest.ledger`) has a PLANNED row before any table is touched and a COMMITTED row last;
each table's last commit of the batch carries ``cdc.batch-id``, ``cdc.source``, ``cdc.offsets`` and its
``cdc.watermark`` in its Iceberg snapshot summary, so a redo skips what was committed before a crash (an
upsert table may commit twice, see :meth:`cdclake.ingest.tables.TableApplier.apply`). The seconds spent per
phase are in the summary's ``phases_s``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdclake.exceptions import SparkDriverError
from cdclake.ingest.batch.apply import apply_tables
from cdclake.ingest.batch.audit import write_audit
from cdclake.ingest.batch.commit import commit_batch, summarise
from cdclake.ingest.batch.context import BatchContext
from cdclake.ingest.batch.decode import decode_batch
from cdclake.ingest.batch.plan import BatchPlan, plan_batch, wait_planned
from cdclake.ingest.batch.read import read_records
from cdclake.ingest.batch.transactions import decide_transactions
from cdclake.ingest.ledger import BatchLedger
from cdclake.ingest.summary import NO_NEW_RECORDS, BatchSummary
from cdclake.spark import driver_exited, driver_failure, more_heap_advice

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.ingest.config import SourceConfig
    from cdclake.ingest.sources import RecordSource

__all__ = ["BatchSummary", "run_batch"]


def run_batch(
    spark: SparkSession, source: SourceConfig, records: RecordSource, *, max_records: int | None = None
) -> BatchSummary:
    """Run one batch for ``source``: from the offsets committed in the lake to the source's current end.

    A batch interrupted earlier (planned but never committed) is redone first, with the same ranges.
    A pending quarantine release is applied even when there are no new records.

    Raises:
        SchemaEvolutionError: when a table's schema policy is ``fail`` and its schema changed.
        RecordSourceError: when records cannot be listed or read.
        SparkDriverError: when the Spark driver runs out of memory or its JVM exits during the batch.
    """
    ctx = BatchContext(spark, source, records, BatchLedger(spark, source.name))
    plan = plan_batch(ctx, max_records)
    if plan is None:
        return BatchSummary(source=source.name, batch_id=None, status=NO_NEW_RECORDS, phases=ctx.phases)
    try:
        return _run_planned(ctx, plan)
    except Exception as exc:
        lost = _driver_lost(ctx.spark, source.name, plan, exc)
        if lost is None:
            raise
        raise lost from exc


def _run_planned(ctx: BatchContext, plan: BatchPlan) -> BatchSummary:
    try:
        batch_records = read_records(ctx, plan)
        decoded = decode_batch(ctx, plan, batch_records)
    finally:
        plan = wait_planned(plan)  # before the first table commit, and before a decoding error is raised
    try:
        tx = decide_transactions(ctx, plan, decoded)
        applied = apply_tables(ctx, plan, decoded, tx, batch_records)
        audited = write_audit(ctx, plan, decoded, tx, applied.tables)
        return commit_batch(ctx, plan, tx, summarise(ctx, plan, decoded, tx, applied, audited))
    finally:
        if driver_exited(ctx.spark) is None:  # a JVM that exited holds nothing to release, and cannot answer
            decoded.batch.release()
            batch_records.release()


def _driver_lost(spark: SparkSession, source: str, plan: BatchPlan, exc: BaseException) -> SparkDriverError | None:
    """The error to raise instead of ``exc`` when the Spark driver ran out of memory or its JVM exited during
    the batch ``plan`` (a Py4J error with a Java stack trace, or a refused connection), else None."""
    what = driver_failure(spark, exc)
    if what is None:
        return None
    return SparkDriverError(
        f"source {source} batch {plan.batch_id}: the Spark driver {what} on a batch of {plan.records:,} records. "
        "The batch did not commit; the next run redoes it, the same records (a table it committed is skipped), so "
        f"give the driver more heap first: {more_heap_advice()}. --max-records caps the batches planned after it."
    )
