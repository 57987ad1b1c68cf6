"""Applying one table's decoded changes to its Iceberg table (upsert or append), with schema evolution."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, DataFrameWriterV2, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.connectors.spec import LakeMode, LakeOptions, PartitionField, SchemaPolicy
from cdclake.decode import columns
from cdclake.decode.batch import TableInfo, TableStats, bounded_keys
from cdclake.decode.columns import LAKE_META_COLUMNS as META_COLUMNS
from cdclake.decode.columns import LAKE_META_NAMES as META_NAMES
from cdclake.exceptions import SchemaEvolutionError
from cdclake.gateway import jvm_class
from cdclake.ingest import apply, mongo
from cdclake.ingest.faults import crash_point, splits_writes
from cdclake.ingest.schema import (
    create_table_ddl,
    identifier_fields_sql,
    plan_evolution,
    storable,
    tombstone_table_ddl,
)
from cdclake.ingest.summary import TableResult
from cdclake.lake.commits import sql_committing
from cdclake.lake.maintenance import REMOVES_ROWS_ONLY
from cdclake.lake.names import TOMBSTONE_SUFFIX, sql_name, table_identifier, table_parts
from cdclake.spark import SESSION_SETTINGS, driver_max_heap, job_description, temporary_conf
from cdclake.sql import quote_identifier, quote_name, quote_string

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

TRUNCATED_AT = "cdc.truncated-at"
#: The snapshot-summary property of every commit the upsert makes to a table or its tombstones: a position no row
#: of either holds a greater one of (see :func:`position_ceiling`).
POSITION_CEILING = "cdc.position-ceiling"
#: Snapshot operations that add no row: compactions (``replace``) and deletes.
_NO_NEW_ROWS = frozenset(("replace", "delete"))
QUARANTINED = "cdc.quarantined"
#: Up to this many events per table and batch, the stored positions are narrowed to the batch's keys by a
#: broadcast semi-join (see :func:`cdclake.ingest.apply.mark_stale`).
BROADCAST_KEYS_MAX_EVENTS = 2_000_000
#: Up to this many records per batch, the decoder's counting pass collects the key values of each table (beside
#: their least and greatest, which it always observes), and the scans of the table and its tombstones are narrowed
#: to them (a list of values, or ranges split at the widest gaps between them) rather than to one range (see
#: :func:`cdclake.ingest.apply.key_bounds`).
KEY_VALUES_MAX_RECORDS = 20_000
#: Up to this estimated size, and :func:`broadcast_max_bytes` of the driver's heap, the batch rows that update or
#: delete stored keys are broadcast to the MERGE (the table is scanned but not shuffled; see
#: :func:`cdclake.ingest.apply.update_sql`). A broadcast hint cannot do it: Spark drops it, because the MERGE's
#: join already carries a hint for the table's side; the session's ``autoBroadcastJoinThreshold`` is raised for the
#: MERGE instead, unless the planner estimates the rows at :data:`DEFAULT_BROADCAST_BYTES` or less.
BROADCAST_SOURCE_MAX_BYTES = 256 * 2**20
#: A broadcast MERGE source is estimated at up to this share of the driver's heap (1/16): the driver collects the
#: rows and builds their hash table in its heap, beside the batch's cached rows. At the default ``900m`` (800 MiB to
#: the JVM) a source estimated at 76 MiB was broadcast and one of 91 MiB failed ("Not enough memory to build and
#: broadcast the table"); with ``2g`` (1,820 MiB), one of 190 MiB was broadcast.
BROADCAST_HEAP_SHARE = 16
#: Spark's default ``autoBroadcastJoinThreshold``, which cdclake's sessions keep: a MERGE source estimated at up to
#: this is broadcast without a change of the setting, so the MERGE does not hold :data:`SESSION_SETTINGS` alone.
DEFAULT_BROADCAST_BYTES = 10 * 2**20
#: The Parquet row-group size of upsert tables (Iceberg's default: 128 MiB). The scans of a MERGE and of its
#: stale marking are narrowed to the batch's key bounds, and Iceberg skips the row groups whose key statistics
#: fall outside them, so a file whose rows lie in key order (such as an initial snapshot of a table clustered by
#: its key) is read only around the batch's keys.
UPSERT_ROW_GROUP_BYTES = 8 * 2**20
#: A MERGE source of up to this many rows (a small batch's) is handed to the planner as a local relation
#: (:func:`merge_broadcast`); a table's marked events are collected into one (:func:`local_rows`) when the batch
#: has up to this many of its events.
LOCAL_SOURCE_MAX_ROWS = 10_000
#: Up to this many fresh rows of a table whose every key column's values the batch lists (:func:`apply.key_bounds`),
#: its updates, deletes and inserts are one MERGE, one commit (:func:`apply.update_sql` with ``insert``): its
#: insert clause makes it an outer join, whose table side the listed keys narrow to their own rows. Other batches
#: MERGE the stored keys (an inner join: the table streams past the broadcast batch) and append the new ones.
ONE_MERGE_MAX_ROWS = LOCAL_SOURCE_MAX_ROWS
#: Held while a namespace is created: two tables of a source's first batch create theirs at once, and the JDBC
#: catalog fails the second ``CREATE NAMESPACE IF NOT EXISTS`` of a namespace (a duplicate row) instead of
#: finding it there.
_NAMESPACES = threading.Lock()
_TRANSFORMS = {"year": "years", "month": "months", "day": "days", "hour": "hours"}


def partition_sql(fld: PartitionField) -> str:
    """Spark DDL of one partition transform from the spec."""
    column = quote_identifier(fld.column)
    if fld.transform == "identity":
        return column
    if fld.width is not None:
        return f"{fld.transform}({fld.width}, {column})"
    return f"{_TRANSFORMS.get(fld.transform, fld.transform)}({column})"


@dataclass(frozen=True)
class FreshRows:
    """One table's events of an upsert batch that its writes commit, and what those writes share.

    Attributes:
        rows: the latest event per key, stale ones dropped, with :data:`apply.IN_TARGET` and
            :data:`apply.TOMBSTONED` marked.
        data_cols: the table's data columns the batch carries.
        keep: the columns whose stored value a placeholder keeps (:attr:`TableStats.keep`).
        bounds: the bounds of the batch's keys (:func:`apply.key_bounds`; empty: the scans are not narrowed).
        tag: the suffix of the writes' temporary views.
        unread: the marking did not read the table: :data:`apply.IN_TARGET` is false throughout, and one MERGE
            updates, deletes or inserts each row whether the table holds its key or not.
    """

    rows: DataFrame
    data_cols: list[str]
    keep: list[str]
    bounds: apply.KeyBounds
    tag: int
    unread: bool = False


def table_properties(spark: SparkSession, name: str) -> dict[str, str]:
    """The properties of the table ``name`` (SQL-quoted), as Iceberg keeps them (table metadata: no Spark job)."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def position_ceiling(spark: SparkSession, name: str) -> list[int] | None:
    """The :data:`POSITION_CEILING` of table ``name`` (SQL-quoted) as its current snapshot has it: ``[]`` when it
    has no snapshot (it holds nothing), None when it is not known.

    The table is refreshed first (a commit of another process is seen). From the current snapshot back, the first
    that carries the property gives it, as long as every snapshot after it only compacted or deleted rows (a
    ``replace``, a ``delete``, or a commit marked :data:`~cdclake.lake.maintenance.REMOVES_ROWS_ONLY`, such as the
    tombstones' expiry); any other commit without it (made by another writer), or a parent expired on the way,
    leaves it unknown. Table metadata only: no Spark job.
    """
    session = spark._jsparkSession  # type: ignore[attr-defined]
    table = jvm_class(spark, "org.apache.iceberg.spark.Spark3Util").loadIcebergTable(session, name)
    table.refresh()
    snapshot = table.currentSnapshot()
    if snapshot is None:
        return []
    while snapshot is not None:
        found = snapshot.summary().get(POSITION_CEILING)
        if found is not None:
            return [int(x) for x in json.loads(found)]
        parent = snapshot.parentId()
        removes_only = snapshot.operation() in _NO_NEW_ROWS or snapshot.summary().get(REMOVES_ROWS_ONLY) == "true"
        if not removes_only or parent is None:
            return None
        snapshot = table.snapshot(parent)
    return None


def local_rows(spark: SparkSession, frame: DataFrame) -> DataFrame:
    """``frame``'s rows collected into the driver's JVM as a local relation (one job), for up to
    :data:`LOCAL_SOURCE_MAX_ROWS` rows.

    Its lineage is cut like a local checkpoint's, and the planner knows its real size: a filter or projection of it
    is folded into another local relation (no job to collect it again), and it is broadcast to any join. Built on
    the JVM side: rows from Python would be pickled and read back as an RDD of unknown size.
    """
    jrows = frame._jdf  # type: ignore[attr-defined]
    local = spark._jsparkSession.createDataFrame(jrows.collectAsList(), jrows.schema())  # type: ignore[attr-defined]
    return DataFrame(local, spark)


def broadcast_max_bytes(max_heap_bytes: int) -> int:
    """The largest estimated size of a MERGE source broadcast by a driver whose heap is ``max_heap_bytes``:
    :data:`BROADCAST_HEAP_SHARE` of it, at most :data:`BROADCAST_SOURCE_MAX_BYTES` (pure)."""
    return min(BROADCAST_SOURCE_MAX_BYTES, max_heap_bytes // BROADCAST_HEAP_SHARE)


def merge_broadcast(
    spark: SparkSession,
    rows: DataFrame,
    view: str,
    sql: str,
    props: dict[str, str] | None = None,
    *,
    count: int | None = None,
) -> None:
    """Run ``sql``, a matched-only MERGE whose source is ``rows`` registered as ``view``, with the source
    broadcast when the planner estimates it at up to :func:`broadcast_max_bytes` of the driver's heap (a larger one
    is shuffled with the table into a sort-merge join); ``props`` go into the commit's summary.

    The planner must know the source's real size (the estimate of a checkpointed join it comes from is far above
    any threshold): ``rows`` that ``count`` says are at most :data:`LOCAL_SOURCE_MAX_ROWS` are collected into the
    driver's JVM as a local relation (:func:`local_rows`: one small job, none when ``rows`` is a filter of a local
    relation already), others are cached and counted first (two passes). The properties go through the calling
    thread (:func:`~cdclake.lake.commits.sql_committing`); the broadcast threshold is a session setting, changed (the
    statement holding :data:`~cdclake.spark.SESSION_SETTINGS` alone) only for a source the planner estimates
    above :data:`DEFAULT_BROADCAST_BYTES`: the other threads' statements go on beside a small batch's MERGE.
    """
    if count is not None and count <= LOCAL_SOURCE_MAX_ROWS:
        # rows of a local relation (a small batch's marked events) are a local relation already: no job
        local = local_rows(spark, rows)
        local.createOrReplaceTempView(view)
        _merge(spark, sql, props or {}, broadcast=planned_bytes(local) > DEFAULT_BROADCAST_BYTES)
        return
    rows = rows.persist()
    try:
        rows.count()
        rows.createOrReplaceTempView(view)
        _merge(spark, sql, props or {}, broadcast=True)
    finally:
        rows.unpersist()


def _append_with(writer: DataFrameWriterV2, props: dict[str, str]) -> None:
    """Append ``writer``'s rows in one commit whose summary carries ``props``."""
    for key, value in props.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    with SESSION_SETTINGS.shared():
        writer.append()


def planned_bytes(frame: DataFrame) -> int:
    """The size the planner estimates ``frame`` at (what it compares with the broadcast threshold)."""
    stats = frame._jdf.queryExecution().optimizedPlan().stats()  # type: ignore[attr-defined]
    return int(stats.sizeInBytes())  # a Scala BigInt, which Py4J returns as an int


def _merge(spark: SparkSession, sql: str, props: dict[str, str], *, broadcast: bool) -> None:
    """Run the MERGE ``sql``, ``props`` in its commit (:func:`~cdclake.lake.commits.sql_committing`), its joins
    planned with the session's settings; ``broadcast``: with the broadcast threshold raised to
    :func:`broadcast_max_bytes` of the driver's heap (holding :data:`~cdclake.spark.SESSION_SETTINGS` alone)."""
    if broadcast:
        threshold = broadcast_max_bytes(driver_max_heap(spark))
        with temporary_conf(spark, {"spark.sql.autoBroadcastJoinThreshold": str(threshold)}):
            sql_committing(spark, sql, props)
        return
    with SESSION_SETTINGS.shared():  # plans its join with the session's settings
        sql_committing(spark, sql, props)


class TableApplier:
    """Applies one decoded table of one batch to the lake."""

    def __init__(self, spark: SparkSession, info: TableInfo, options: LakeOptions, batch_props: dict[str, str]) -> None:
        self.spark = spark
        self.info = info
        self.options = options
        self.batch_props = batch_props
        self.name = sql_name(info.table_id)
        self.tombstones = sql_name(info.table_id, TOMBSTONE_SUFFIX)
        self.identifier = table_identifier(info.table_id)

    # -- catalog helpers --------------------------------------------------------------------------
    def _exists(self, name: str) -> bool:
        return bool(self.spark.catalog.tableExists(name.replace("`", "")))

    def _properties(self, name: str | None = None) -> dict[str, str]:
        return table_properties(self.spark, name or self.name)

    @staticmethod
    def _never_written(props: Mapping[str, str]) -> bool:
        """True when the table whose properties are ``props`` has no snapshot yet (created, never committed to: it
        holds nothing). Table metadata only (Iceberg's ``current-snapshot-id`` property): no Spark job."""
        return props.get("current-snapshot-id", "none") == "none"

    def batch_already_applied(self, batch_id: str) -> bool:
        """True when a snapshot of this table carries ``cdc.batch-id`` = ``batch_id`` (a redo after a crash)."""
        if not self._exists(self.name):
            return False
        found = self.spark.sql(
            f"SELECT count(*) AS n FROM {self.name}.snapshots WHERE summary['cdc.batch-id'] = '{batch_id}'"
        ).collect()[0]["n"]
        return int(found) > 0

    def _namespace(self) -> None:
        parts = self.name.split(".")
        with _NAMESPACES:
            self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {'.'.join(parts[:-1])}")

    def set_aside(self, suffix: str) -> str | None:
        """Rename the table to ``<table><suffix>`` and drop its tombstones, so the next apply creates it anew.

        Idempotent: nothing happens when ``<table><suffix>`` already exists (a redo of the same batch)
        or the table does not.

        Returns:
            The identifier the table now has, or None when nothing was renamed.
        """
        parts = table_parts(self.info.table_id)
        renamed = sql_name(self.info.table_id, suffix)
        if self._exists(renamed) or not self._exists(self.name):
            return None
        self.spark.sql(f"DROP TABLE IF EXISTS {self.tombstones} PURGE")
        self.spark.sql(f"ALTER TABLE {self.name} RENAME TO {quote_name((*parts[:-1], parts[-1] + suffix))}")
        identifier = self.identifier + suffix
        logger.warning("%s: set aside as %s (recreated from its events)", self.identifier, identifier)
        return identifier

    def ensure_table(self, schema: Any) -> list[str]:
        """Create the table on first sight, or plan and apply schema evolution per policy.

        Returns:
            Descriptions of schema changes applied.

        Raises:
            SchemaEvolutionError: when the policy forbids the change (``fail``) or it cannot be applied.
        """
        keys = self.info.key_columns if self.options.mode == LakeMode.UPSERT else ()
        if not self._exists(self.name):
            self._namespace()
            parts = tuple(partition_sql(f) for f in self.options.partition_fields())
            props = {
                "write.merge.mode": "merge-on-read",
                "write.update.mode": "merge-on-read",
                "write.delete.mode": "merge-on-read",
                # a MERGE writes its join's output as it is partitioned: Iceberg's default (hash) shuffles it again
                # by the table's partitions, a Spark job of every MERGE, for the same files when the batch is small
                "write.merge.distribution-mode": "none",
                "cdc.mode": self.options.mode.value,
                "cdc.schema-policy": self.options.schema_policy.value,
            }
            if self.options.mode == LakeMode.UPSERT:
                props["write.parquet.row-group-size-bytes"] = str(UPSERT_ROW_GROUP_BYTES)
            meta = {
                LakeMode.UPSERT: META_COLUMNS,
                LakeMode.APPEND: (*META_COLUMNS, (columns.KEY.name, columns.KEY.sql_type)),
                LakeMode.SCD2: (*META_COLUMNS, *apply.SCD2_COLUMNS),
            }[self.options.mode]
            self.spark.sql(create_table_ddl(self.name, schema, keys, meta, parts, props))
            if keys:
                self.spark.sql(identifier_fields_sql(self.name, keys))
                self.spark.sql(tombstone_table_ddl(self.tombstones, schema, keys))
            logger.info("created %s (mode=%s, keys=%s)", self.identifier, self.options.mode.value, keys)
            return [f"created {self.identifier}"]
        ignore = (*META_NAMES, columns.KEY.name, *(n for n, _ in apply.SCD2_COLUMNS))
        plan = plan_evolution(self.name, self.spark.table(self.name).schema, schema, ignore)
        if not plan.changes:
            return []
        described = [c.describe() for c in plan.changes]
        policy = self.options.schema_policy
        if policy == SchemaPolicy.FAIL and any(c.kind.value != "column_missing_in_source" for c in plan.changes):
            raise SchemaEvolutionError(
                f"{self.identifier}: schema changed and its policy is 'fail': {'; '.join(described)}"
            )
        if plan.incompatible or (policy == SchemaPolicy.QUARANTINE and plan.ddl):
            raise SchemaEvolutionError(
                f"{self.identifier}: cannot evolve ({policy.value}): "
                + "; ".join(c.describe() for c in (plan.incompatible or plan.changes))
            )
        for ddl in plan.ddl:
            self.spark.sql(ddl)
        logger.info("%s: schema evolved: %s", self.identifier, "; ".join(described))
        return described

    def storable_schema(self) -> T.StructType:
        """The decoded data columns with the types Iceberg stores (logical-type metadata kept)."""
        return T.StructType(
            [T.StructField(f.name, storable(f.dataType), True, f.metadata) for f in self.info.schema.fields]
        )

    # -- apply ------------------------------------------------------------------------------------
    def _conform(self, frame: DataFrame) -> DataFrame:
        """Cast data columns to the types Iceberg stores."""
        cols = []
        for fld in self.info.schema.fields:
            target = storable(fld.dataType)
            cols.append(
                F.col(quote_identifier(fld.name)).cast(target).alias(fld.name)
                if target != fld.dataType
                else F.col(quote_identifier(fld.name))
            )
        return frame.select(*cols, *[F.col(c) for c in frame.columns if c.startswith("_cdc_")])

    def apply(self, frame: DataFrame, batch_id: str, redo: bool = True, stats: TableStats | None = None) -> TableResult:
        """Apply the batch's change rows of this table.

        ``frame`` is read several times: it should read cached rows (the job's come from
        :meth:`cdclake.decode.DecodedBatch.materialise`). ``stats``: its :class:`TableStats`, when known
        (:meth:`cdclake.decode.DecodedBatch.table_stats`); else one pass over ``frame`` computes them.

        Raises:
            SchemaEvolutionError: see :meth:`ensure_table`.
        """
        result = TableResult(table=self.identifier, mode=self.options.mode.value)
        frame = self._conform(frame)
        stats = stats if stats is not None else self._stats(frame)
        result.events = stats.events
        result.watermark = stats.watermark
        if not stats.events:  # everything held back (transaction-consistent mode) or nothing decoded
            return result
        # only a redo of an interrupted batch can find its own commit already there
        if redo and self.batch_already_applied(batch_id):
            result.already_applied = True
            return result
        result.schema_changes = self.ensure_table(self.storable_schema())
        props = dict(self.batch_props)
        if result.watermark is not None:
            props["cdc.watermark"] = json.dumps(result.watermark)
        if self.options.mode == LakeMode.APPEND:
            self._append(frame, props, result)
        elif self.options.mode == LakeMode.SCD2:
            self._scd2(frame, props, result, stats)
        else:
            self._upsert(frame, props, result, stats)
        return result

    def _stats(self, frame: DataFrame) -> TableStats:
        """Events per op, greatest position, last truncate, placeholder columns and the keys' least and greatest
        values: one Spark job."""
        keys = bounded_keys(self.info.key_columns, frame.schema)
        return TableStats.from_row(frame.agg(*TableStats.aggregates(keys=keys)).collect()[0], keys)

    def _append_rows(self, rows: DataFrame, props: dict[str, str]) -> None:
        """Append ``rows`` shaped as the table's rows (:func:`apply.insert_frame`), ``props`` in the commit."""
        data_cols = [f.name for f in self.info.schema.fields]
        writer = apply.insert_frame(rows, self.spark.table(self.name).schema, data_cols).writeTo(self.name)
        _append_with(writer, props)

    def _append(self, frame: DataFrame, props: dict[str, str], result: TableResult) -> None:
        self._append_rows(frame, props)
        result.applied = sum(result.events.values())
        result.applied_by_op = dict(result.events)

    def _upsert(self, frame: DataFrame, props: dict[str, str], result: TableResult, stats: TableStats) -> None:
        keys = self.info.key_columns
        data_cols = [f.name for f in self.info.schema.fields]
        ceiling = self._position_ceiling()
        # every commit to the table and its tombstones carries the new ceiling (their rows' positions and the batch's)
        props[POSITION_CEILING] = json.dumps(max(ceiling, stats.watermark or []))
        # every event newer than anything stored (the usual case: no redelivery, no late snapshot read): none can be
        # stale, so the marking reads the stored keys only, not their positions (an array of decimals per row)
        newer = stats.floor is not None and stats.floor > ceiling
        stored_props = self._properties()
        truncated_at, truncated = self._handle_truncate(stats.truncate, stored_props)
        if truncated:  # its deletes and its property changed the table
            stored_props = self._properties()
        events = apply.row_events(apply.drop_before_truncate(frame, truncated_at))
        keep = stats.keep
        if self.info.connector == "mongodb":
            stored_docs = self.spark.table(self.name).select("id", "document")
            latest = (
                mongo.fold_documents(events, stored_docs)
                .withColumn(apply.KEEP, F.array().cast("array<string>"))
                .select(*data_cols, apply.KEEP, *[c for c in events.columns if c.startswith("_cdc_")])
            )
        else:
            latest = apply.latest_per_key(events, keys, data_cols, keep)
        # events per (op, stale, key in the table), observed while the marked events are materialised
        observed = Observation(f"cdclake-marked-{uuid.uuid4().hex}")
        splits = [(op, stale, present) for op in apply.ROW_OPS for stale in (False, True) for present in (False, True)]
        # written as SQL: one call into the driver's JVM per tally (a Column built call by call costs about ten)
        tallies = [
            F.expr(
                f"count_if(_cdc_op = {quote_string(op)} AND {apply.STALE} = {str(stale).lower()} "
                f"AND {apply.IN_TARGET} = {str(present).lower()}) AS n{i}"
            )
            for i, (op, stale, present) in enumerate(splits)
        ]
        # the fresh deletes of keys that already have a tombstone: theirs is advanced by a MERGE, the others' appended
        tallies.append(F.expr(f"count_if(_cdc_op = 'd' AND NOT {apply.STALE} AND {apply.TOMBSTONED}) AS redeleted"))
        events_n = sum(stats.events.values())
        small = events_n <= LOCAL_SOURCE_MAX_ROWS
        first_batch = self._never_written(stored_props) and self._never_written(self._properties(self.tombstones))
        if first_batch:
            # a table's first batch (its initial snapshot, typically the largest): nothing stored, nothing
            # deleted before, so no event is stale and every key is new; no join against the empty tables
            marking = latest.select(
                "*", *[F.lit(False).alias(c) for c in (apply.STALE, apply.IN_TARGET, apply.TOMBSTONED)]
            )
            bounds: apply.KeyBounds = {}
            unread = False
        else:
            bounds = self._key_bounds(stats, latest.schema)
            listed = apply.lists_every_key(bounds, keys)
            # every event newer than everything stored, and few enough of them, their keys listed, for one MERGE:
            # it updates, deletes or inserts each key whether the table holds it or not, so the marking does not
            # read the table (only the tombstones, for the batch's deletes)
            unread = newer and small and listed and events_n <= ONE_MERGE_MAX_ROWS and not splits_writes()
            # the batch's keys narrow the stored positions before the join when they fit in a broadcast, unless
            # the bounds list every key column's values: the scans' filters then leave only those keys' rows
            narrow = not listed and events_n <= BROADCAST_KEYS_MAX_EVENTS
            batch_keys = self._batch_keys(events, stats) if narrow else None
            stored = None if unread else self._keys_and_positions(self.name, bounds, positions=not newer)
            # with every event newer than every tombstone, the tombstones only tell which of the batch's deletes
            # delete a key again: a batch without deletes does not read them
            tombs = (
                self._keys_and_positions(self.tombstones, bounds, positions=not newer)
                if not newer or stats.events.get("d")
                else None
            )
            # a small batch's keys narrow both scans to at most a row per key: by the semi-join, or by the list of
            # a single key column's values (lists of several columns' values match their every combination)
            few = small and (batch_keys is not None or len(keys) == 1)
            marking = apply.mark_stale(
                latest, stored, tombs, keys, batch_keys=batch_keys, broadcast_stored=few, newer=newer
            )
        # materialised with its lineage cut: a MERGE whose source plan still scans the target table can silently
        # match nothing (seen with Iceberg 1.11 merge-on-read deletes); its joins are planned with the broadcast
        # threshold, a session setting. A small batch's are collected as a local relation: the writes' filters of
        # it are local relations too, which their MERGEs broadcast without a job to collect them
        with SESSION_SETTINGS.shared(), job_description(self.spark, "stale marking"):
            observing = marking.observe(observed, *tallies)
            marked = local_rows(self.spark, observing) if small else observing.localCheckpoint(eager=True)
        try:
            tally = observed.get
            split = {key: int(tally[f"n{i}"]) for i, key in enumerate(splits) if tally[f"n{i}"]}
            counts: dict[tuple[str, bool], int] = {}
            for (op, stale, _), n in split.items():
                counts[(op, stale)] = counts.get((op, stale), 0) + n
            result.count_ops(counts)
            rows = marked.where(~F.col(apply.STALE)).drop(apply.STALE)
            fresh = FreshRows(rows, data_cols, keep, bounds, tag=abs(hash(self.name)), unread=unread)
            if counts.get(("d", False)):
                with job_description(self.spark, "tombstones"):
                    ceiling_only = {POSITION_CEILING: props[POSITION_CEILING]}
                    self._write_tombstones(fresh, counts[("d", False)], int(tally["redeleted"]), ceiling_only)
                crash_point("tombstones")
            if unread:  # one MERGE, deletes included (those of keys the table does not hold match nothing)
                with job_description(self.spark, "merge"):
                    self._merge_fresh(fresh, props, sum(n for (_, stale), n in counts.items() if not stale), True)
                return
            matched = sum(n for (_, stale, present), n in split.items() if present and not stale)
            added = sum(n for (op, stale, present), n in split.items() if not present and not stale and op != "d")
            self._write_upsert(fresh, props, matched, added)
        finally:
            marked.unpersist()

    def _batch_keys(self, events: DataFrame, stats: TableStats) -> DataFrame:
        """The batch's keys, for the staleness check's semi-join: a single key column's collected values as local
        rows (broadcast without a pass over the events), else the events' key columns."""
        keys = self.info.key_columns
        values = (stats.key_values or {}).get(keys[0]) if len(keys) == 1 else None
        if values is not None:
            # values are collected of BOUNDED_KEY_TYPES only, which make the same values again from Python (a
            # timestamp would pass through the Python process's time zone)
            schema = T.StructType([T.StructField(keys[0], events.schema[keys[0]].dataType, True)])
            return self.spark.createDataFrame([(v,) for v in values], schema)
        return events.select(*[quote_identifier(k) for k in keys])

    def _key_bounds(self, stats: TableStats, schema: T.StructType) -> apply.KeyBounds:
        """The bounds of the batch's keys (:func:`apply.key_bounds`) from what ``stats`` observed of them, as
        literals of their types in ``schema`` (the rows as the table stores them)."""
        types = {k: schema[k].dataType for k in self.info.key_columns if k in schema.fieldNames()}
        return apply.key_bounds(stats.key_least, stats.key_greatest, types, stats.key_values)

    def _position_ceiling(self) -> list[int]:
        """A position that no row of the table or its tombstones is above: the greater of their
        :func:`position_ceiling`; a table whose ceiling is not known (a commit of another writer since) is scanned
        for its greatest position (one job)."""
        found = []
        for name in (self.name, self.tombstones):
            ceiling = position_ceiling(self.spark, name)
            if ceiling is None:
                with job_description(self.spark, "position ceiling"):
                    top = self.spark.sql(f"SELECT max(_cdc_position) AS top FROM {name}").collect()[0]["top"]
                ceiling = [int(x) for x in top] if top is not None else []
            found.append(ceiling)
        return max(found)

    def _keys_and_positions(self, name: str, bounds: apply.KeyBounds, positions: bool = True) -> DataFrame:
        """The key columns and, ``positions``, ``_cdc_position`` of table ``name``, within ``bounds`` (files outside
        them unread)."""
        # one statement, analysed once (a DataFrame call each for the scan, the columns and the filter cost three)
        names = [quote_identifier(k) for k in self.info.key_columns] + (["_cdc_position"] if positions else [])
        columns = ", ".join(names)
        where = f" WHERE {apply.key_range_sql(bounds)}" if bounds else ""
        return self.spark.sql(f"SELECT {columns} FROM {name}{where}")

    def _write_tombstones(self, fresh: FreshRows, deletes: int, redeleted: int, props: dict[str, str]) -> None:
        """Record the tombstones of the fresh deletes (``deletes`` of them, ``redeleted`` of keys with a tombstone),
        ``props`` in the commits' summaries.

        A key's first tombstone is appended; a key deleted again (re-inserted since, or a redo that finds the
        delete's own tombstone) has its tombstone advanced by a MERGE. So each key keeps one tombstone, its
        newest delete's, and a redelivered or redone delete adds none.
        """
        keys = self.info.key_columns
        deleted = fresh.rows.where(F.col("_cdc_op") == "d")
        if redeleted < deletes:
            _append_with(
                apply.tombstone_rows(deleted.where(~F.col(apply.TOMBSTONED)), keys).writeTo(self.tombstones), props
            )
        if redeleted:
            sql = apply.tombstone_merge_sql(self.tombstones, f"cdc_batch_{fresh.tag}", keys, fresh.bounds)
            again = deleted.where(F.col(apply.TOMBSTONED)).select(*[quote_identifier(k) for k in keys], "_cdc_position")
            merge_broadcast(self.spark, again, f"cdc_batch_{fresh.tag}", sql, props, count=redeleted)

    def _write_upsert(self, fresh: FreshRows, props: dict[str, str], matched: int, added: int) -> None:
        """Commit the fresh rows: ``matched`` of keys the table holds, ``added`` of new keys.

        Up to :data:`ONE_MERGE_MAX_ROWS` of them, their every key column listed by the batch's bounds, both
        kinds are one MERGE, one commit carrying the batch properties. Otherwise a MERGE of the keys the table
        holds (matched-only: an inner join that broadcasts a batch up to :func:`broadcast_max_bytes`) and
        an append of the others are two commits; only the last carries the batch properties (``cdc.batch-id``
        ...), the first is marked ``cdc.partial-of``. A crash between them leaves rows that a redo finds stored at
        their own position (so stale, skipped): the redo commits only what is missing, with the batch id. When
        every event is stale, the MERGE (of nothing) still runs with the batch properties. Every commit carries the
        :data:`POSITION_CEILING`.

        ``CDC_FAULT_AT=table-partial`` (tests) always takes the two commits, to crash between them.
        """
        merge, append = matched > 0 or added == 0, added > 0
        listed = apply.lists_every_key(fresh.bounds, self.info.key_columns)
        if merge and append and listed and matched + added <= ONE_MERGE_MAX_ROWS and not splits_writes():
            with job_description(self.spark, "merge"):
                self._merge_fresh(fresh, props, matched + added, insert=True)
            return
        if merge:
            partial = {"cdc.partial-of": props.get("cdc.batch-id", ""), "cdc.step": "update"}
            partial[POSITION_CEILING] = props[POSITION_CEILING]
            with job_description(self.spark, "merge"):
                self._merge_fresh(fresh, partial if append else props, matched)
            if append:
                crash_point("table-partial")
        if append:
            with job_description(self.spark, "append"):
                self._append_rows(fresh.rows.where(~F.col(apply.IN_TARGET) & (F.col("_cdc_op") != "d")), props)

    def _merge_fresh(self, fresh: FreshRows, props: dict[str, str], count: int, insert: bool = False) -> None:
        """The MERGE of the fresh rows whose key the table holds and, ``insert``, of the non-delete rows of the
        others (``count`` rows in all, :func:`apply.update_sql`; every fresh row when the marking did not read the
        table, :attr:`FreshRows.unread`), the table's scan narrowed by the batch's key bounds."""
        target_cols = [f.name for f in self.spark.table(self.name).schema.fields]
        view = f"cdc_update_{fresh.tag}"
        keys = self.info.key_columns
        sql = apply.update_sql(
            self.name, view, keys, fresh.data_cols, target_cols, META_NAMES, fresh.keep, fresh.bounds, insert=insert
        )
        rows = fresh.rows
        if not fresh.unread:
            wanted = F.col(apply.IN_TARGET)
            if insert:  # a delete of a key the table does not hold leaves only its tombstone
                wanted = wanted | (F.col("_cdc_op") != "d")
            rows = rows.where(wanted)
        rows = rows.drop(apply.IN_TARGET)
        merge_broadcast(self.spark, rows, view, sql, props, count=count)

    def _scd2(self, frame: DataFrame, props: dict[str, str], result: TableResult, stats: TableStats) -> None:
        """History mode: every change becomes a version with ``_cdc_valid_from``/``_cdc_valid_to`` positions."""
        keys = self.info.key_columns
        data_cols = [f.name for f in self.info.schema.fields]
        key_cols = [F.col(quote_identifier(k)) for k in keys]
        truncated_at = self._scd2_truncate(stats.truncate)
        events = apply.row_events(apply.drop_before_truncate(frame, truncated_at))
        table = self.spark.table(self.name)
        seen = table.groupBy(*key_cols).agg(
            F.max(F.greatest("_cdc_valid_from", F.coalesce("_cdc_valid_to", "_cdc_valid_from"))).alias("__seen")
        )
        with SESSION_SETTINGS.shared():  # joins: their broadcast threshold is a session setting
            marked = (
                events.join(seen, on=list(keys), how="left")
                .withColumn(apply.STALE, F.coalesce(F.col("__seen") >= F.col("_cdc_position"), F.lit(False)))
                .drop("__seen")
                .localCheckpoint(eager=True)
            )
            counts = {
                (r["_cdc_op"], r[apply.STALE]): int(r["count"])
                for r in marked.groupBy("_cdc_op", apply.STALE).count().collect()
            }
            result.count_ops(counts)
            fresh = marked.where(~F.col(apply.STALE)).drop(apply.STALE)
            current = table.where("_cdc_is_current").select(
                *key_cols, *[F.col(quote_identifier(c)) for c in stats.keep]
            )
            versions = apply.scd2_versions(fresh, current, keys, data_cols, stats.keep).localCheckpoint(eager=True)
            closes = fresh.groupBy(*key_cols).agg(F.min("_cdc_position").alias("_close_at")).localCheckpoint(eager=True)
        tag = abs(hash(self.name))
        versions.createOrReplaceTempView(f"cdc_versions_{tag}")
        closes.createOrReplaceTempView(f"cdc_closes_{tag}")
        target_cols = [f.name for f in table.schema.fields]
        carried = [*data_cols, *META_NAMES, *(n for n, _ in apply.SCD2_COLUMNS)]
        sql = apply.scd2_merge_sql(self.name, f"cdc_versions_{tag}", f"cdc_closes_{tag}", keys, target_cols, carried)
        _merge(self.spark, sql, props, broadcast=False)

    def _scd2_truncate(self, position: list[int] | None) -> list[int] | None:
        stored = self._properties().get(TRUNCATED_AT)
        current = json.loads(stored) if stored else None
        if position is None or (current is not None and position <= current):
            return current
        keys = self.info.key_columns
        open_keys = (
            self.spark.table(self.name)
            .where("_cdc_is_current")
            .select(*[quote_identifier(k) for k in keys])
            .localCheckpoint(eager=True)
        )
        view = f"cdc_open_{abs(hash(self.name))}"
        open_keys.createOrReplaceTempView(view)
        with SESSION_SETTINGS.shared():  # a commit: the session's settings give it properties
            self.spark.sql(apply.close_versions_sql(self.name, view, keys, position))
        self.spark.sql(f"ALTER TABLE {self.name} SET TBLPROPERTIES ('{TRUNCATED_AT}'='{json.dumps(position)}')")
        return position

    def _delete_older_than(self, table: str, position: list[int]) -> None:
        """Delete the rows of ``table`` whose ``_cdc_position`` is older than ``position``.

        Iceberg cannot push an array comparison down as a delete filter, so the doomed keys are
        collected first (lineage cut) and removed with a MERGE.
        """
        keys = self.info.key_columns
        literal = apply.position_literal(position)
        doomed = (
            self.spark.table(table)
            .where(F.col("_cdc_position") < F.expr(literal))
            .select(*[quote_identifier(k) for k in keys])
        ).localCheckpoint(eager=True)
        if doomed.isEmpty():
            return
        view = f"cdc_doomed_{abs(hash(table))}"
        doomed.createOrReplaceTempView(view)
        with SESSION_SETTINGS.shared():  # a commit: the session's settings give it properties
            self.spark.sql(apply.delete_older_sql(table, view, keys, position))

    def _handle_truncate(self, position: list[int] | None, props: dict[str, str]) -> tuple[list[int] | None, bool]:
        """Apply the batch's last truncate (rows older than it go); return the table's truncate position and whether
        this call truncated (deleted rows and moved the position).

        ``props``: the table's properties as the batch found them.
        """
        stored = props.get(TRUNCATED_AT)
        current = json.loads(stored) if stored else None
        if position is None or (current is not None and position <= current):
            return current, False
        self._delete_older_than(self.name, position)
        self._delete_older_than(self.tombstones, position)
        self.spark.sql(f"ALTER TABLE {self.name} SET TBLPROPERTIES ('{TRUNCATED_AT}'='{json.dumps(position)}')")
        logger.info("%s: truncated at position %s", self.identifier, position)
        return position, True
