"""Read a source table and its lake table, render both canonically, and compare them (I/O).

* The **source** is read with :mod:`cdclake.databases` as a reader (not the capture user): the spec's
  reader connection from :func:`cdclake.databases.resolve_connection`, i.e. an explicit connection, else
  ``AIRFLOW_CONN_<CONNECTION_ID>_READER`` (``AIRFLOW_CONN_CDC_POSTGRES_READER`` for the ``postgres`` spec,
  whose ``connection_id`` is ``cdc_postgres``), else the local stack's ``reader`` user (``SELECT`` on the
  captured tables only). The session runs in UTC, with the connection's connect and statement timeouts.
* The **lake** table ``lake.<topic_prefix>.<schema-or-db>.<table>`` is read with pyiceberg, selecting
  only the source's columns (current rows: an upsert table as is, an scd2 table ``WHERE _cdc_is_current``;
  an append table is a changelog and is skipped).
* Both sides are rendered with the lake column's type as target type (:mod:`cdclake.reconcile.rows`).

The comparison is on *current* rows of both sides, read one after the other: the source must be
quiescent (or the comparison repeated) for a difference to mean the lake is wrong. The lake's frontier
(the last batch id and watermark in the table's snapshot summary) is reported next to the result.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cdclake.connectors import ConnectorSpec, LakeMode, TableSpec
from cdclake.databases import (
    SourceConnection,
    SourceDatabase,
    SourceDatabaseError,
    load_database,
    open_database,
    resolve_connection,
)
from cdclake.databases import parse_connection as parse_connection  # re-exported by cdclake.reconcile
from cdclake.databases import reader_connection_env as reader_connection_env  # re-exported by cdclake.reconcile
from cdclake.exceptions import ConfigError, NotInstalledError, ReconcileError
from cdclake.lake import LakeConfig
from cdclake.lake.names import spec_table_parts
from cdclake.reconcile.rows import ANY, RowKey, RowSet, column_type_from_iceberg, diff_row_sets, render_key

logger = logging.getLogger(__name__)

#: Snapshot-summary keys the ingestion job writes on each table's last commit of a batch.
BATCH_ID_PROPERTY = "cdc.batch-id"
WATERMARK_PROPERTY = "cdc.watermark"
CURRENT_FLAG_COLUMN = "_cdc_is_current"

TableStatus = Literal["equal", "different", "skipped"]


# --- where the source is ------------------------------------------------------------------------


def check_readable(spec: ConnectorSpec) -> None:
    """Fail unless reconcile can read the spec's database (a registered SQL database of :mod:`cdclake.databases`).

    Raises:
        ConfigError: for MongoDB, Informix and unknown connectors (the message says what they lack).
    """
    try:
        load_database(spec.connector.value)
    except (ConfigError, NotInstalledError) as exc:
        raise ConfigError(
            f"spec {spec.name}: reconcile reads PostgreSQL, MySQL and MariaDB, not {spec.connector} ({exc})"
        ) from exc


def resolve_source_connection(
    spec: ConnectorSpec, *, dsn: str | None = None, environ: Mapping[str, str] | None = None
) -> SourceConnection:
    """The reader connection of ``spec``: ``dsn`` (named ``--dsn`` in messages), else
    ``AIRFLOW_CONN_<CONNECTION_ID>_READER``, else the local stack (:func:`cdclake.databases.resolve_connection`).

    Raises:
        ConfigError: when the spec's connector is not a relational database reconcile can read, or
            the DSN / connection cannot be parsed.
    """
    check_readable(spec)
    return resolve_connection(spec, uri=dsn, origin="--dsn", environ=environ)


# --- the lake -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LakeFrontier:
    """How far the lake table is: the last batch that committed to it.

    Attributes:
        batch_id: ``cdc.batch-id`` of the newest snapshot that carries one.
        watermark: ``cdc.watermark`` (the table's greatest ``_cdc_position`` in that batch).
        snapshot_id: the table's current snapshot.
        committed_at: when the current snapshot was committed (UTC).
    """

    batch_id: str | None = None
    watermark: str | None = None
    snapshot_id: int | None = None
    committed_at: dt.datetime | None = None


def lake_frontier(table: Any) -> LakeFrontier:
    """The :class:`LakeFrontier` of a pyiceberg table (walks back to the last snapshot with a batch id)."""
    current = table.current_snapshot()
    if current is None:
        return LakeFrontier()
    snapshot = current
    while snapshot is not None:
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if BATCH_ID_PROPERTY in props:
            return LakeFrontier(
                batch_id=props.get(BATCH_ID_PROPERTY),
                watermark=props.get(WATERMARK_PROPERTY),
                snapshot_id=current.snapshot_id,
                committed_at=dt.datetime.fromtimestamp(current.timestamp_ms / 1000, tz=dt.UTC),
            )
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return LakeFrontier(
        snapshot_id=current.snapshot_id, committed_at=dt.datetime.fromtimestamp(current.timestamp_ms / 1000, tz=dt.UTC)
    )


def lake_identifier(spec: ConnectorSpec, table: TableSpec) -> tuple[str, ...]:
    """Iceberg identifier of a spec table (without catalog), e.g. ``("pg", "inventory", "customers")``."""
    return spec_table_parts(spec, table.name)


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableReconciliation:
    """The comparison of one source table with its lake table.

    Attributes:
        source_table: the spec's data-collection name, e.g. ``inventory.customers``.
        lake_table: ``lake.<prefix>.<schema-or-db>.<table>``.
        status: ``equal``, ``different`` or ``skipped`` (see ``note``).
        key_columns, columns: what was compared (the source's columns that the lake has).
        source_rows, lake_rows: row counts.
        source_checksum, lake_checksum: order-independent checksums of the rendered rows.
        missing_keys: keys in the source, not in the lake; ``extra_keys`` the reverse; ``different_keys``
            keys whose rows differ; ``duplicate_keys`` keys found more than once in the lake.
        missing_columns: source columns the lake table does not have.
        column_types: the target type each compared column was rendered as.
        frontier: the lake table's last batch.
        note: why a table was skipped or could not be compared.
    """

    source_table: str
    lake_table: str
    status: TableStatus
    key_columns: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    source_rows: int = 0
    lake_rows: int = 0
    source_checksum: str = ""
    lake_checksum: str = ""
    missing_keys: tuple[RowKey, ...] = ()
    extra_keys: tuple[RowKey, ...] = ()
    different_keys: tuple[RowKey, ...] = ()
    duplicate_keys: tuple[RowKey, ...] = ()
    missing_columns: tuple[str, ...] = ()
    column_types: tuple[str, ...] = ()
    frontier: LakeFrontier = LakeFrontier()
    note: str | None = None

    @property
    def equal(self) -> bool:
        return self.status == "equal"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (keys as lists)."""
        return {
            "source_table": self.source_table,
            "lake_table": self.lake_table,
            "status": self.status,
            "key_columns": list(self.key_columns),
            "columns": list(self.columns),
            "column_types": list(self.column_types),
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "source_checksum": self.source_checksum,
            "lake_checksum": self.lake_checksum,
            "missing_keys": [list(k) for k in self.missing_keys],
            "extra_keys": [list(k) for k in self.extra_keys],
            "different_keys": [list(k) for k in self.different_keys],
            "duplicate_keys": [list(k) for k in self.duplicate_keys],
            "missing_columns": list(self.missing_columns),
            "frontier": {
                "batch_id": self.frontier.batch_id,
                "watermark": self.frontier.watermark,
                "snapshot_id": self.frontier.snapshot_id,
                "committed_at": self.frontier.committed_at.isoformat() if self.frontier.committed_at else None,
            },
            "note": self.note,
        }


@dataclass(frozen=True)
class ReconcileReport:
    """Every compared table of one source.

    Attributes:
        source: the spec name.
        database: where the source was read (no password).
        lake: the lake's catalog location.
        tables: one result per table, in spec order.
    """

    source: str
    database: str
    lake: str
    tables: tuple[TableReconciliation, ...]

    @property
    def equal(self) -> bool:
        """No compared table differs (skipped tables do not count)."""
        return all(t.status != "different" for t in self.tables)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "database": self.database,
            "lake": self.lake,
            "equal": self.equal,
            "tables": [t.as_dict() for t in self.tables],
        }


# --- reconcile ----------------------------------------------------------------------------------


def select_tables(spec: ConnectorSpec, names: Sequence[str] | None) -> list[TableSpec]:
    """The spec's tables named by ``names`` (``customers``, ``inventory.customers`` or ``lake.pg.inventory.customers``).

    Raises:
        ConfigError: when a name matches none of the spec's tables.
    """
    if not names:
        return list(spec.tables)
    chosen: list[TableSpec] = []
    for name in names:
        matches = [
            t
            for t in spec.tables
            if name
            in (
                t.name,
                t.name.rpartition(".")[2],
                "lake." + ".".join(lake_identifier(spec, t)),
                ".".join(lake_identifier(spec, t)),
            )
        ]
        if not matches:
            raise ConfigError(
                f"table {name!r} is not captured by spec {spec.name}; its tables: {', '.join(t.name for t in spec.tables)}"
            )
        chosen += [t for t in matches if t not in chosen]
    return chosen


def _lake_label(lake: LakeConfig) -> str:
    return str(lake.root) if lake.kind == "embedded" else str(lake.uri)


def reconcile_source(
    spec: ConnectorSpec,
    *,
    lake: LakeConfig | None = None,
    tables: Sequence[str] | None = None,
    dsn: str | None = None,
    environ: Mapping[str, str] | None = None,
    connection: SourceConnection | None = None,
) -> ReconcileReport:
    """Compare each table of ``spec`` between the source database and the lake.

    Args:
        spec: the connector spec (``cdclake.connectors.load_spec``).
        lake: the lake; default from ``CDC_LAKE_*``.
        tables: only these tables (see :func:`select_tables`); default every table of the spec.
        dsn: source connection URI; default ``AIRFLOW_CONN_<CONNECTION_ID>_READER``, else the local stack.
        environ: environment to read the connection variable from (default ``os.environ``).
        connection: the source connection itself (the Airflow task resolves its reader connection with
            :func:`cdclake.databases.resolve_connection`); it wins over ``dsn`` and the environment.

    Raises:
        ConfigError: on an unknown table or an unparsable connection.
        ReconcileError: when the source database cannot be reached or read.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    lake = lake or LakeConfig.from_env()
    chosen = select_tables(spec, tables)
    source = connection or resolve_source_connection(spec, dsn=dsn, environ=environ)
    catalog = load_catalog(**lake.pyiceberg_properties())
    try:
        database = open_database(source)
    except SourceDatabaseError as exc:
        raise ReconcileError(str(exc)) from exc
    results: list[TableReconciliation] = []
    try:
        for table_spec in chosen:
            ident = lake_identifier(spec, table_spec)
            try:
                lake_table = catalog.load_table(ident)
            except NoSuchTableError:
                lake_table = None
            results.append(_reconcile_table(database, table_spec, ident, lake_table))
    finally:
        database.close()
    return ReconcileReport(source=spec.name, database=source.describe(), lake=_lake_label(lake), tables=tuple(results))


def _reconcile_table(
    database: SourceDatabase, table_spec: TableSpec, ident: tuple[str, ...], lake_table: Any
) -> TableReconciliation:
    namespace, _, name = table_spec.name.rpartition(".")
    lake_name = "lake." + ".".join(ident)
    base: dict[str, Any] = {"source_table": table_spec.name, "lake_table": lake_name}
    frontier = lake_frontier(lake_table) if lake_table is not None else LakeFrontier()
    if table_spec.lake.mode is LakeMode.APPEND:
        return TableReconciliation(
            **base, status="skipped", frontier=frontier, note="append mode: the lake table is a changelog"
        )
    try:
        source_columns = database.columns(namespace, name)
        key_columns = database.primary_key(namespace, name) if source_columns else []
    except Exception as exc:  # noqa: BLE001 - driver errors
        raise ReconcileError(f"cannot read the columns of {table_spec.name}: {exc}") from exc
    if not source_columns:
        return TableReconciliation(**base, status="different", frontier=frontier, note="source table not found")

    lake_fields: dict[str, Any] = {}
    if lake_table is not None:
        schema = lake_table.schema()
        lake_fields = {f.name: f for f in schema.fields}
        if not key_columns:
            key_columns = sorted(schema.identifier_field_names())
    compared = [c for c in source_columns if lake_table is None or c in lake_fields]
    missing_columns = tuple(c for c in source_columns if c not in compared)
    if not key_columns:
        key_columns = list(compared)  # no key anywhere: the whole row is its identity
    types = [
        column_type_from_iceberg(lake_fields[c].field_type, lake_fields[c].doc) if c in lake_fields else ANY
        for c in compared
    ]
    key_index = [compared.index(k) for k in key_columns if k in compared]
    key_types = [types[i] for i in key_index]

    src = RowSet()
    try:
        for row in database.rows(namespace, name, compared):
            src.add(render_key([row[i] for i in key_index], key_types), row, types)
    except Exception as exc:  # noqa: BLE001 - driver errors
        raise ReconcileError(f"cannot read {table_spec.name}: {exc}") from exc

    lk = RowSet()
    note = None
    if lake_table is None:
        note = "lake table does not exist (not ingested yet?)"
    elif lake_table.current_snapshot() is not None:
        scan_kwargs: dict[str, Any] = {"selected_fields": tuple(compared)}
        if table_spec.lake.mode is LakeMode.SCD2 and CURRENT_FLAG_COLUMN in lake_fields:
            from pyiceberg.expressions import EqualTo

            scan_kwargs["row_filter"] = EqualTo(CURRENT_FLAG_COLUMN, True)
        for batch in lake_table.scan(**scan_kwargs).to_arrow_batch_reader():
            columns = [batch.column(c).to_pylist() for c in compared]
            for row in zip(*columns, strict=True):
                lk.add(render_key([row[i] for i in key_index], key_types), row, types)
    diff = diff_row_sets(src, lk)
    if lake_table is None and src.count == 0:
        note = "empty at the source and not in the lake (Debezium emits nothing for an empty table)"
    same = (
        diff.empty and not missing_columns and src.checksum == lk.checksum and (lake_table is not None or not src.count)
    )
    logger.info("reconciled %s with %s: %s rows vs %s rows", table_spec.name, lake_name, src.count, lk.count)
    return TableReconciliation(
        **base,
        status="equal" if same else "different",
        key_columns=tuple(key_columns),
        columns=tuple(compared),
        source_rows=src.count,
        lake_rows=lk.count,
        source_checksum=src.checksum,
        lake_checksum=lk.checksum,
        missing_keys=diff.missing,
        extra_keys=diff.extra,
        different_keys=diff.different,
        duplicate_keys=diff.duplicate,
        missing_columns=missing_columns,
        column_types=tuple(str(t) for t in types),
        frontier=frontier,
        note=note,
    )
