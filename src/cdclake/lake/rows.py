"""Small row appends and reads of lake tables through pyiceberg, on the catalog of a Spark session.

The ingestion job writes a few rows per batch to its audit tables (the ledger, transactions, schema changes,
releases). Through Spark each is a query plan, a job and a write of seconds on a cold driver; through
pyiceberg, on the same catalog, tens of milliseconds. Large writes (dead letters, quarantined records,
table data) stay Spark's. After an append the session's cached table is refreshed, so that its own later
reads see the row.

Every pyiceberg commit copies the table's metadata, its whole snapshot list: pyiceberg's own transaction on every
read of its staged metadata, about 18 times per append (an append to a table of 1,000 snapshots takes 1.1-1.5 s,
docs/benchmarks.md), this module's (:func:`transaction`) once per staged update. A follower commits to the ledger
twice per batch, and would slow down batch by batch; so an append tidies its table (:func:`tidy_snapshots`):
past :data:`TIDY_AFTER_SNAPSHOTS` snapshots it expires all but the newest :data:`KEEP_SNAPSHOTS`. What these
tables hold is in their rows (a redo looks for its own rows, :func:`holds_batch`); the files only expired snapshots
referenced are left to the maintenance's orphan-file removal.
"""

from __future__ import annotations

import functools
import json
import logging
import weakref
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.lake.catalog import CATALOG_NAME, LakeConfig, unquote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

#: Commits retried when another writer (a concurrent batch of another source) committed first.
COMMIT_ATTEMPTS = 5
#: Snapshot count above which :func:`tidy_snapshots` expires a table's older snapshots, and how many it keeps.
TIDY_AFTER_SNAPSHOTS = 100
KEEP_SNAPSHOTS = 20
#: Properties of the tables written through :func:`append_rows` (set at their creation, else by their first
#: append): pyiceberg's appends merge the table's manifests
#: (Java Iceberg's default, not pyiceberg's). Else a table of one small append per batch has a manifest per append,
#: and every scan plan reads them all: after 1,000 appends, finding the newest rows by their column bounds takes
#: 1.7 s, merged 0.1 s (docs/benchmarks.md).
APPEND_TABLE_PROPERTIES = {"commit.manifest-merge.enabled": "true"}

_catalogs: dict[str, Catalog] = {}
_lakes: weakref.WeakKeyDictionary[SparkContext, LakeConfig] = weakref.WeakKeyDictionary()


def session_catalog(spark: SparkSession, lake: LakeConfig | None = None) -> Catalog:
    """The pyiceberg catalog of the lake ``spark`` opens as ``lake`` (:meth:`LakeConfig.from_spark_conf`),
    opened once per process with timeouts and bounded retries (:meth:`LakeConfig.open_catalog`)."""
    config = lake or _session_lake(spark)
    key = json.dumps(config.pyiceberg_properties(), sort_keys=True)
    if key not in _catalogs:
        _catalogs[key] = config.open_catalog()
    return _catalogs[key]


def _session_lake(spark: SparkSession) -> LakeConfig:
    """The lake of ``spark``'s catalog settings, read once per SparkContext (they are fixed at its start; each
    read of them is a JVM round trip of tens of milliseconds)."""
    context = spark.sparkContext
    lake = _lakes.get(context)
    if lake is None:
        lake = _lakes[context] = LakeConfig.from_spark_conf(dict(context.getConf().getAll()))
    return lake


def identifier(name: str) -> tuple[str, ...]:
    """A table's Spark SQL name (``lake.ns.table``, quoted or not) as a pyiceberg identifier (no catalog)."""
    parts = unquote(name)
    return parts[1:] if parts[0] == CATALOG_NAME else parts


def ensure_namespace(catalog: Catalog, namespace: tuple[str, ...]) -> None:
    """Create ``namespace`` unless it exists, also when another process creates it at the same moment (pyiceberg's
    SQL catalog then raises the database's unique-constraint error rather than ``NamespaceAlreadyExistsError``)."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise


def load(spark: SparkSession, name: str, lake: LakeConfig | None = None) -> Table | None:
    """The table called ``name`` (a Spark SQL name), or None when it does not exist."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return session_catalog(spark, lake).load_table(identifier(name))
    except NoSuchTableError:
        return None


def committed_by(table: Table, batch_id: str) -> bool:
    """True when a snapshot of ``table`` carries ``cdc.batch-id`` = ``batch_id`` (a redo's earlier commit)."""
    return any(
        snapshot.summary is not None and snapshot.summary.get("cdc.batch-id") == batch_id
        for snapshot in table.metadata.snapshots
    )


def holds_batch(table: Table, batch_id: str) -> bool:
    """True when ``table`` has a row whose ``batch_id`` column is ``batch_id`` (a redo's earlier append, also
    after :func:`tidy_snapshots` expired its snapshot); reads the whole table but the files whose column bounds
    exclude it."""
    from pyiceberg.expressions import EqualTo

    return bool(table.scan(row_filter=EqualTo("batch_id", batch_id), selected_fields=("batch_id",), limit=1).to_arrow())


def tidy_snapshots(table: Table) -> int:
    """When ``table`` has more than :data:`TIDY_AFTER_SNAPSHOTS` snapshots, expire all but the newest
    :data:`KEEP_SNAPSHOTS` (a branch or tag head stays); returns how many it expired. A concurrent commit, or any
    other failure (logged: the tidy-up is housekeeping, the caller's commit is made), leaves it to a later call
    (0)."""
    from pyiceberg.exceptions import CommitFailedException

    snapshots = table.metadata.snapshots
    if len(snapshots) <= TIDY_AFTER_SNAPSHOTS:
        return 0
    heads = {ref.snapshot_id for ref in table.metadata.refs.values()}
    newest_first = sorted(snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number), reverse=True)
    old = [s.snapshot_id for s in newest_first[max(KEEP_SNAPSHOTS, 1) :] if s.snapshot_id not in heads]
    try:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    except CommitFailedException:
        logger.info("table %s: snapshot tidy-up left for later (concurrent commit)", ".".join(table.name()))
        return 0
    except Exception:  # noqa: BLE001 - see the docstring
        logger.warning("table %s: snapshot tidy-up failed; left for later", ".".join(table.name()), exc_info=True)
        return 0
    return len(old)


def transaction(table: Table) -> Any:
    """A pyiceberg transaction on ``table`` that works out the metadata its staged updates make once per update.

    pyiceberg's ``Transaction.table_metadata`` applies the staged updates to the table's metadata and deep-copies
    the result on every read, and an append reads it about 18 times: 0.2 s of each follower batch's lock, ledger
    and audit commits went to those copies (docs/benchmarks.md). The updates are a tuple replaced on every
    update and the table's metadata is replaced on every commit, and pyiceberg's metadata models are frozen, so
    one result per (metadata, updates) pair serves every read.
    """
    return _transaction_class()(table)


@functools.cache
def _transaction_class() -> type:
    from pyiceberg.table import Transaction
    from pyiceberg.table.update import update_table_metadata

    class MemoTransaction(Transaction):
        _memo: tuple[Any, Any, Any] | None = None

        @property
        def table_metadata(self) -> Any:
            base, updates = self._table.metadata, self._updates
            memo = self._memo
            if memo is None or memo[0] is not base or memo[1] is not updates:
                memo = self._memo = (base, updates, update_table_metadata(base, updates))
            return memo[2]

    return MemoTransaction


def append_rows(
    spark: SparkSession,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    batch_id: str,
    recorded_at: bool = False,
    lake: LakeConfig | None = None,
    more: pa.Table | None = None,
) -> None:
    """Append ``rows`` and ``more`` to the existing table ``name`` in one commit carrying ``cdc.batch-id`` (and
    :data:`APPEND_TABLE_PROPERTIES` when the table lacks them), then tidy its snapshots (:func:`tidy_snapshots`).

    Args:
        rows: column values (columns missing from a row are null; timestamps naive local time or aware).
        recorded_at: set the ``recorded_at`` column to now.
        more: further rows as Arrow columns (columns the table lacks are an error, those missing null).

    Raises:
        NoSuchTableError: the table does not exist.
        CommitFailedException: other writers kept committing first (after :data:`COMMIT_ATTEMPTS` tries).
    """
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    now = datetime.now(UTC)
    values = [_arrow_values({**row, **({"recorded_at": now} if recorded_at else {})}) for row in rows]
    catalog = session_catalog(spark, lake)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = catalog.load_table(identifier(name))
        schema = table.schema().as_arrow()
        data = pa.Table.from_pylist(values, schema=schema)
        if more is not None:
            data = pa.concat_tables([data, _conformed(more, schema, now if recorded_at else None)])
        stale = {k: v for k, v in APPEND_TABLE_PROPERTIES.items() if table.properties.get(k) != v}
        try:
            with transaction(table) as tx:
                if stale:  # a table created without them
                    tx.set_properties(stale)
                tx.append(data, snapshot_properties={"cdc.batch-id": batch_id})
            break
        except CommitFailedException:
            if attempt == COMMIT_ATTEMPTS:
                raise
    tidy_snapshots(table)
    spark.catalog.refreshTable(name)


def _conformed(table: pa.Table, schema: pa.Schema, recorded_at: datetime | None) -> pa.Table:
    """``table`` with ``schema``'s columns in its order, missing ones null (``recorded_at``: that time)."""
    import pyarrow as pa

    columns = []
    for f in schema:
        if f.name in table.column_names:
            columns.append(table.column(f.name).cast(f.type))
        elif f.name == "recorded_at" and recorded_at is not None:
            columns.append(pa.array([recorded_at] * table.num_rows, f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    unknown = set(table.column_names) - set(schema.names)
    if unknown:
        raise ValueError(f"columns {sorted(unknown)} are not in the table's schema {schema.names}")
    return pa.Table.from_arrays(columns, schema=schema)


def _arrow_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """Python values as Arrow takes them: naive datetimes as local time, maps as key-value pairs."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            value = value.astimezone(UTC)
        elif isinstance(value, Mapping):
            value = list(value.items())
        out[key] = value
    return out


def local_time(value: datetime | None) -> datetime | None:
    """An aware timestamp as naive local time (what PySpark returns for a Spark TIMESTAMP)."""
    return None if value is None else value.astimezone().replace(tzinfo=None)
