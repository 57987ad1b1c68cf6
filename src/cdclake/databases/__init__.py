"""The source databases: where they are, and one open connection to read (or write) them.

Public API::

    from cdclake.databases import open_database, resolve_connection

    source = resolve_connection(spec)                # uri > AIRFLOW_CONN_<CONNECTION_ID>_READER > local stack
    with open_database(source) as db:                # connect and statement timeouts from the connection
        db.table("inventory", "customers").columns   # SourceColumn: type, nullability, precision, scale
        db.primary_key("inventory", "customers")
        db.row_counts(["inventory.customers"])
        db.dbapi                                     # the DB-API connection, for writers (signals)

    modes = TypeModes.from_connector_config(connect_config(spec, endpoint), "postgresql")
    connect_fields(db.table("inventory", "all_types"), "postgresql", modes)   # the Connect schemas Debezium sends

Implementations are registered by dialect name (:data:`cdclake.databases.connection.DIALECT_NAMES` maps
connection types to dialects): ``postgresql`` (psycopg), ``mysql`` and ``mariadb`` (PyMySQL). ``informix`` and
``mongodb`` are registered as not supported here: opening one raises an error that says what they need.
"""

from __future__ import annotations

from collections.abc import Callable

from cdclake.databases.base import SourceDatabase
from cdclake.databases.catalog import SourceColumn, SourceTable, informix_column
from cdclake.databases.connect_types import TypeModes, connect_field, connect_fields
from cdclake.databases.connection import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_PORTS,
    DEFAULT_STATEMENT_TIMEOUT_S,
    DIALECT_NAMES,
    Role,
    SourceConnection,
    connection_env,
    connection_id,
    dialect_name,
    parse_connection,
    reader_connection_env,
    resolve_connection,
    stack_connection,
)
from cdclake.exceptions import ConfigError, NotInstalledError, SourceDatabaseError

#: What a registry entry is: a function returning the implementation, or raising when there is none here.
DatabaseLoader = Callable[[], type[SourceDatabase]]


def _load_postgres() -> type[SourceDatabase]:
    from cdclake.databases.postgres import _PostgresDatabase

    return _PostgresDatabase


def _load_mysql() -> type[SourceDatabase]:
    from cdclake.databases.mysql import _MySqlDatabase

    return _MySqlDatabase


def _load_informix() -> type[SourceDatabase]:
    raise NotInstalledError(
        "Informix connections are not supported by cdclake.databases: they need an Informix DB-API driver "
        "(IBM's IfxPy, built against the Informix Client SDK), which cdclake does not install"
    )


def _load_mongodb() -> type[SourceDatabase]:
    raise ConfigError(
        "MongoDB is not a SQL database: cdclake.databases reads PostgreSQL, MySQL and MariaDB; MongoDB is reached "
        "with pymongo (cdclake.signals.mongo_client, pip install pymongo)"
    )


_DATABASES: dict[str, DatabaseLoader] = {
    "postgresql": _load_postgres,
    "mysql": _load_mysql,
    "mariadb": _load_mysql,
    "informix": _load_informix,
    "mongodb": _load_mongodb,
}


def register_database(
    dialect: str, loader: DatabaseLoader, *, aliases: tuple[str, ...] = (), default_port: int | None = None
) -> None:
    """Register (or replace) the implementation of ``dialect``.

    Args:
        dialect: the dialect name (also accepted as a connection type).
        loader: returns the :class:`SourceDatabase` subclass, or raises when the dialect cannot be read here.
        aliases: other connection types (URI schemes, Airflow ``conn_type``) that mean this dialect.
        default_port: the port of a connection that names none.
    """
    _DATABASES[dialect] = loader
    for name in (dialect, *aliases):
        DIALECT_NAMES[name] = dialect
    if default_port is not None:
        DEFAULT_PORTS[dialect] = default_port


def registered_dialects() -> tuple[str, ...]:
    """Every registered dialect, sorted (including the ones registered as not supported)."""
    return tuple(sorted(_DATABASES))


def load_database(dialect: str) -> type[SourceDatabase]:
    """The :class:`SourceDatabase` implementation of a dialect or connection type (``postgres``, ``mariadb``...).

    Raises:
        ConfigError: for an unknown dialect, or one registered as not supported (MongoDB).
        NotInstalledError: when the dialect needs a driver that is not available (Informix).
    """
    name = dialect_name(dialect) or dialect
    loader = _DATABASES.get(name)
    if loader is None:
        raise ConfigError(
            f"no source database is registered for {dialect!r}; registered: {', '.join(registered_dialects())}"
        )
    return loader()


def open_database(source: SourceConnection, *, utc: bool = True) -> SourceDatabase:
    """Connect to ``source`` (autocommit, its connect and statement timeouts).

    Args:
        source: where the database is (:func:`resolve_connection`, :func:`parse_connection`).
        utc: run the session in UTC (naive timestamps read back as UTC, as Debezium renders them); writers that
            must keep the server's zone pass False.

    Raises:
        SourceDatabaseError: when the database cannot be reached (names the connection, not its password).
        ConfigError, NotInstalledError: see :func:`load_database`.
    """
    return load_database(source.dialect).open(source, utc=utc)


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_STATEMENT_TIMEOUT_S",
    "DatabaseLoader",
    "Role",
    "SourceColumn",
    "SourceConnection",
    "SourceDatabase",
    "SourceDatabaseError",
    "SourceTable",
    "TypeModes",
    "connect_field",
    "connect_fields",
    "connection_env",
    "connection_id",
    "dialect_name",
    "informix_column",
    "load_database",
    "open_database",
    "parse_connection",
    "reader_connection_env",
    "register_database",
    "registered_dialects",
    "resolve_connection",
    "stack_connection",
]
