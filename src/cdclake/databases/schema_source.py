"""Where the ingestion job takes column types from when a connector's records carry no schema.

A spec's ``converters.schema_source`` (or ``--schema-source``) picks one of:

* ``database`` (the default): :class:`DatabaseSchemaSource` reads each captured table's columns from the source
  database's own catalog, through the spec's reader connection, and maps them to the Connect schemas the
  connector sends (:mod:`cdclake.databases.connect_types`, under the modes of the spec's connector config);
* ``lake``: :class:`cdclake.lake.schema_source.LakeSchemaSource`, the existing Iceberg tables' schemas;
* the path of a JSON file: :meth:`cdclake.decode.ConnectSchemaSource.from_file`.

:func:`spec_schema_source` builds the one a spec (or an override) names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdclake.connectors import ConnectorKind, ConnectorSpec, SchemaSourceKind
from cdclake.connectors.config import DatabaseEndpoint, connect_config
from cdclake.databases.base import SourceDatabase
from cdclake.databases.catalog import SourceTable
from cdclake.databases.connect_types import TypeModes, connect_fields
from cdclake.databases.connection import SourceConnection, resolve_connection
from cdclake.decode.options import TableId
from cdclake.decode.schema_source import ConnectSchemaSource, NoSchemaSource, SchemaSource
from cdclake.exceptions import ConfigError, ConnectSchemaError
from cdclake.lake.names import catalog_identifier, table_identifier

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

logger = logging.getLogger(__name__)

#: Debezium's property naming the key columns of tables without a primary key (or to override it).
MESSAGE_KEY_COLUMNS = "message.key.columns"


def parse_message_key_columns(value: str) -> dict[str, tuple[str, ...]]:
    """``message.key.columns`` (``<table>:<col>,<col>;<table>:<col>``) as ``{table: columns}``.

    Raises:
        ConfigError: for an entry without ``:`` or without columns (names the property).
    """
    out: dict[str, tuple[str, ...]] = {}
    for entry in filter(None, (part.strip() for part in value.split(";"))):
        table, sep, columns = entry.partition(":")
        names = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not sep or not table.strip() or not names:
            raise ConfigError(
                f"{MESSAGE_KEY_COLUMNS}: {entry!r} is not '<table>:<column>[,<column>...]' "
                "(entries are separated by ';')"
            )
        out[table.strip()] = names
    return out


class DatabaseSchemaSource(SchemaSource):
    """Row schemas read from the source database's catalog, as the connector would send them.

    Each table is read once per batch (:meth:`begin_batch` forgets the previous batch's reads), and again when
    the batch's records carry a field the schema read lacks. A column the sampled records carry that the
    database no longer has (dropped since the records were written) is taken from ``lake`` when the lake table
    has it, so its values in those records are kept; the columns of the table's later batches are the
    database's again. Key columns come from ``message.key.columns`` when the connector config sets it for the
    table, else from the primary key.

    Args:
        spec: the connector spec (its dialect, and its connector config's type-mapping modes).
        connection: where the database is (:func:`cdclake.databases.resolve_connection`).
        lake: the lake's schemas, for columns the database no longer has (optional).
        opener: opens a connection (default :func:`cdclake.databases.open_database`).
    """

    def __init__(
        self,
        spec: ConnectorSpec,
        connection: SourceConnection,
        *,
        lake: SchemaSource | None = None,
        opener: Callable[[SourceConnection], SourceDatabase] | None = None,
    ) -> None:
        config = connect_config(spec, DatabaseEndpoint(host="localhost", database=spec.database))
        self.spec = spec
        self.dialect = spec.connector.value
        self.modes = TypeModes.from_connector_config(config, self.dialect)
        self._message_keys = parse_message_key_columns(config.get(MESSAGE_KEY_COLUMNS, ""))
        self._connection = connection
        self._lake = lake
        self._opener = opener
        self._db: SourceDatabase | None = None
        self._tables: dict[str, SourceTable] = {}
        self._keys: dict[str, tuple[str, ...]] = {}
        #: How many times each table's catalog was read (for logs and tests).
        self.reads: dict[str, int] = {}

    def describe(self) -> str:
        return f"the {self.dialect} catalog through {self._connection.origin}"

    def begin_batch(self) -> None:
        self._tables.clear()
        self._keys.clear()
        if self._lake is not None:
            self._lake.begin_batch()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _database(self) -> SourceDatabase:
        if self._db is None:
            if self._opener is not None:
                self._db = self._opener(self._connection)
            else:
                from cdclake.databases import open_database

                self._db = open_database(self._connection)
        return self._db

    @staticmethod
    def _split(table: str) -> tuple[str, str]:
        namespace, _, name = table.rpartition(".")
        return namespace, name

    def _read(self, table: str) -> SourceTable:
        namespace, name = self._split(table)
        found = self._database().table(namespace, name)
        self.reads[table] = self.reads.get(table, 0) + 1
        self._tables[table] = found
        return found

    def row_fields(
        self, topic: str, table: str | None, *, seen_fields: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]] | None:
        if table is None:
            return None
        found = self._tables.get(table)
        if found is None or not seen_fields <= set(found.column_names):
            if found is not None:
                logger.info(
                    "schema source database: %s: records carry %s, not in the catalog read; reading it again",
                    table,
                    sorted(seen_fields - set(found.column_names)),
                )
            found = self._read(table)
        if not found.exists:
            logger.warning("schema source database: %s shows no column to %s", table, self._connection.origin)
            return self._lake.row_fields(topic, table, seen_fields=seen_fields) if self._lake else None
        fields = connect_fields(found, self.dialect, self.modes)
        return self._with_lake_columns(topic, table, fields, seen_fields)

    def _with_lake_columns(
        self, topic: str, table: str, fields: list[dict[str, Any]], seen: frozenset[str]
    ) -> list[dict[str, Any]]:
        names = {fld["field"] for fld in fields}
        lake_fields = (self._lake.row_fields(topic, table) if self._lake else None) or []
        kept = [fld for fld in lake_fields if fld["field"] in seen and fld["field"] not in names]
        names |= {fld["field"] for fld in kept}
        unknown = sorted(seen - names)
        if unknown:
            raise ConnectSchemaError(
                f"{table}: the records carry column(s) {', '.join(unknown)} that neither the database "
                f"({self._connection.origin}) nor the lake table has; their types cannot be read "
                "(give them in a schema file: converters.schema_source: <file>.json)"
            )
        return fields + [{**fld, "optional": True} for fld in kept]

    def key_columns(self, topic: str, table: str | None) -> tuple[str, ...] | None:
        if table is None:
            return None
        for name in (table, table.rpartition(".")[2]):
            if name in self._message_keys:
                return self._message_keys[name]
        if table not in self._keys:
            namespace, name = self._split(table)
            self._keys[table] = tuple(self._database().primary_key(namespace, name))
        return self._keys[table] or None


def lake_identifier(topic_prefix: str) -> Callable[[str], str]:
    """The lake identifier (without catalog) of a ``<db-or-schema>.<table>`` of a source with ``topic_prefix``."""

    def identify(table: str) -> str:
        namespace, _, name = table.rpartition(".")
        return catalog_identifier(table_identifier(TableId(server=topic_prefix, namespace=namespace, table=name)))

    return identify


def spec_schema_source(
    spec: ConnectorSpec,
    *,
    override: str | None = None,
    catalog: Catalog | None = None,
    connection: SourceConnection | None = None,
) -> SchemaSource:
    """The schema source of a spec: ``override`` (``database``, ``lake`` or a JSON file) else the spec's
    ``converters.schema_source``.

    Args:
        spec: the connector spec.
        override: a ``--schema-source`` value.
        catalog: the lake's pyiceberg catalog (``lake``; with ``database``, the lake's schemas then fill in
            columns the database no longer has).
        connection: the database connection for ``database`` (default: the spec's reader connection,
            :func:`cdclake.databases.resolve_connection`).

    Raises:
        ConfigError: for an unknown kind, a missing or bad schema file, or ``lake`` without a catalog.
    """
    if spec.connector is ConnectorKind.MONGODB:
        return NoSchemaSource()  # documents decode without a schema
    kind = override or spec.converters.schema_source
    lake = _lake_source(spec.topic_prefix, catalog)
    if kind == SchemaSourceKind.DATABASE:
        return DatabaseSchemaSource(spec, connection or resolve_connection(spec), lake=lake)
    if kind == SchemaSourceKind.LAKE:
        if lake is None:
            raise ConfigError("schema source 'lake' needs the lake's catalog")
        return lake
    if override is not None:
        return _file_source(override)
    path = spec.schema_source_file
    if path is None:  # pragma: no cover - the spec model only admits the kinds and *.json paths
        raise ConfigError(f"{spec.describe()}: converters.schema_source {kind!r} is not a kind or a file")
    return ConnectSchemaSource.from_file(path)


def _file_source(value: str) -> SchemaSource:
    if not value.lower().endswith(".json"):
        raise ConfigError(f"schema source {value!r}: use 'database', 'lake' or the path of a JSON schema file (*.json)")
    return ConnectSchemaSource.from_file(Path(value).expanduser())


def _lake_source(topic_prefix: str, catalog: Catalog | None) -> SchemaSource | None:
    if catalog is None:
        return None
    from cdclake.lake.schema_source import LakeSchemaSource

    return LakeSchemaSource(catalog, lake_identifier(topic_prefix))


def schema_source_for(
    spec: ConnectorSpec | None,
    topic_prefix: str,
    *,
    override: str | None = None,
    catalog: Catalog | None = None,
) -> SchemaSource:
    """The schema source of a run (a :data:`cdclake.decode.schema_source.SchemaSourceFactory`).

    With a spec, :func:`spec_schema_source`. Without one (a replay of files alone), ``override`` must name
    ``lake`` or a JSON file: the database connection comes from a spec.

    Raises:
        ConfigError: without a spec, when ``override`` is missing or is ``database``.
    """
    if spec is not None:
        return spec_schema_source(spec, override=override, catalog=catalog)
    if override is None or override == SchemaSourceKind.DATABASE:
        raise ConfigError(
            "the records carry no schema: pass --spec SPEC (column types from its source database) or "
            "--schema-source lake|FILE.json"
        )
    if override == SchemaSourceKind.LAKE:
        lake = _lake_source(topic_prefix, catalog)
        if lake is None:
            raise ConfigError("schema source 'lake' needs the lake's catalog")
        return lake
    return _file_source(override)
