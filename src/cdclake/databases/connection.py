"""Where a source database is: :class:`SourceConnection`, parsed from a URI or an Airflow connection, or resolved
for a connector spec.

A spec has two connections: ``connection_id`` (the *writer*, allowed to insert signal rows) and
``<connection_id>_reader`` (the *reader*, ``SELECT`` on the captured tables). :func:`resolve_connection` takes,
in this order, an explicit URI (a CLI option, or an Airflow task's connection rendered with
``Connection.get_uri()``), the Airflow-style variable ``AIRFLOW_CONN_<CONNECTION_ID>[_READER]``, the local stack.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from cdclake.connectors import ConnectorSpec
from cdclake.exceptions import ConfigError

if TYPE_CHECKING:
    from cdclake.stack import Stack

Role = Literal["reader", "writer"]

#: Seconds to wait for a connection before giving up.
DEFAULT_CONNECT_TIMEOUT_S = 10
#: Seconds a statement may run before the server cancels it (0: no limit).
DEFAULT_STATEMENT_TIMEOUT_S = 600.0

#: Connection types (URI schemes, Airflow ``conn_type``) -> the dialect the databases are registered under
#: (:func:`cdclake.databases.register_database` adds to it).
DIALECT_NAMES: dict[str, str] = {
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mariadb",
    "mongo": "mongodb",
    "mongodb": "mongodb",
    "informix": "informix",
}
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mongodb": 27017, "informix": 9088}
#: The dialects the local stack runs (PostgreSQL, and MariaDB for both MySQL-family names).
STACK_DIALECTS = ("postgresql", "mysql", "mariadb")
#: The local stack's user for each role (``cdclake.stack``: ``cdc_reader`` and ``cdc_signal``).
STACK_USERS: dict[Role, str] = {"reader": "reader", "writer": "signal"}


@dataclass(frozen=True)
class SourceConnection:
    """How to reach a source database.

    Attributes:
        dialect: a key of the database registry (``postgresql``, ``mysql``, ``mariadb``, ...).
        host, port, user, password, database: the usual.
        origin: where these settings came from (``--dsn``, an env var's name, ``connection <id>``, ``local stack``);
            errors name it so that the reader knows what to fix.
        connect_timeout_s: seconds to wait for the connection (option ``connect_timeout``).
        statement_timeout_s: seconds a statement may run, 0 for no limit (option ``statement_timeout``).
    """

    dialect: str
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    origin: str
    connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S
    statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S

    def describe(self) -> str:
        """``user@host:port/database (origin)``, without the password."""
        return f"{self.user}@{self.host}:{self.port}/{self.database} ({self.origin})"

    def with_timeouts(self, connect_s: int | None = None, statement_s: float | None = None) -> SourceConnection:
        """A copy with the given (non-None) timeouts replaced."""
        return replace(
            self,
            connect_timeout_s=self.connect_timeout_s if connect_s is None else int(connect_s),
            statement_timeout_s=self.statement_timeout_s if statement_s is None else float(statement_s),
        )


def dialect_name(conn_type: str | None) -> str | None:
    """The dialect of a connection type or URI scheme (``postgres`` -> ``postgresql``; ``mysql+pymysql`` ->
    ``mysql``), None when unknown."""
    return DIALECT_NAMES.get(str(conn_type or "").lower().split("+")[0])


def connection_id(spec: ConnectorSpec, role: Role = "reader") -> str:
    """The Airflow connection id of ``spec`` for ``role``: ``cdc_postgres`` (writer), ``cdc_postgres_reader``."""
    return spec.reader_connection_id if role == "reader" else spec.connection_id


def connection_env(spec: ConnectorSpec, role: Role = "reader") -> str:
    """Name of the env var holding a connection of ``spec``, e.g. ``AIRFLOW_CONN_CDC_POSTGRES_READER``."""
    return "AIRFLOW_CONN_" + connection_id(spec, role).upper().replace("-", "_")


def reader_connection_env(spec: ConnectorSpec) -> str:
    """Name of the env var holding the source's reader connection, e.g. ``AIRFLOW_CONN_CDC_POSTGRES_READER``."""
    return connection_env(spec, "reader")


def _timeout(options: Mapping[str, Any], key: str, default: float, origin: str) -> float:
    value = options.get(key)
    if value in (None, ""):
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds < 0:
        raise ConfigError(f"{origin}: option {key}={value!r} is not a number of seconds")
    return seconds


def parse_connection(value: str, *, default_database: str, origin: str) -> SourceConnection:
    """Parse an Airflow connection (JSON or URI) or a DSN URI such as ``postgresql://u:p@host:5432/demo``.

    The options ``connect_timeout`` and ``statement_timeout`` (seconds) are read from the JSON's ``extra`` or
    the URI's query, also inside Airflow's ``__extra__`` query parameter.

    Raises:
        ConfigError: when the value cannot be parsed or names an unknown connection type.
    """
    text = value.strip()
    options: dict[str, Any] = {}
    if text.startswith("{"):
        try:
            conn = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{origin}: not valid JSON: {exc}") from exc
        conn_type, host, port = conn.get("conn_type"), conn.get("host"), conn.get("port")
        user, secret, database = conn.get("login"), conn.get("password"), conn.get("schema")
        extra = conn.get("extra") or {}
        try:
            options = json.loads(extra) if isinstance(extra, str) else dict(extra)
        except ValueError as exc:
            raise ConfigError(f"{origin}: extra is not a JSON object: {exc}") from exc
    else:
        parts = urlsplit(text)
        conn_type, host = parts.scheme, unquote(parts.hostname) if parts.hostname else None
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"{origin}: {exc}") from exc
        user = unquote(parts.username) if parts.username else None
        secret = unquote(parts.password) if parts.password else None
        database = unquote(parts.path.lstrip("/")) or None
        options = dict(parse_qsl(parts.query))
        if "__extra__" in options:
            try:
                options.update(json.loads(options.pop("__extra__")))
            except ValueError as exc:
                raise ConfigError(f"{origin}: __extra__ is not valid JSON: {exc}") from exc
    dialect = dialect_name(conn_type)
    if dialect is None:
        raise ConfigError(f"{origin}: connection type {conn_type!r} is not one of {', '.join(DIALECT_NAMES)}")
    if not host or not user:
        raise ConfigError(f"{origin}: the connection needs a host and a login")
    port = port or DEFAULT_PORTS.get(dialect)
    if not port:
        raise ConfigError(f"{origin}: the connection needs a port ({dialect} has no default port)")
    return SourceConnection(
        dialect=dialect,
        host=str(host),
        port=int(port),
        user=str(user),
        password=str(secret or ""),
        database=str(database or default_database),
        origin=origin,
        connect_timeout_s=int(_timeout(options, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S, origin)),
        statement_timeout_s=_timeout(options, "statement_timeout", DEFAULT_STATEMENT_TIMEOUT_S, origin),
    )


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    """The environment the connection variables are read from (``os.environ`` unless one is given)."""
    return os.environ if environ is None else environ


def resolve_connection(
    spec: ConnectorSpec,
    *,
    role: Role = "reader",
    uri: str | None = None,
    origin: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> SourceConnection:
    """The connection of ``spec`` for ``role``: ``uri``, else ``AIRFLOW_CONN_<CONNECTION_ID>[_READER]``, else the
    local stack's user for the role.

    Args:
        spec: the connector spec; its ``database`` is the default database.
        role: ``reader`` (``<connection_id>_reader``) or ``writer`` (``connection_id``).
        uri: an explicit connection (URI or Airflow JSON); wins over everything else.
        origin: what to call ``uri`` in messages (default ``explicit connection``).
        environ: the environment to read the variable from (default ``os.environ``).

    Raises:
        ConfigError: when a connection cannot be parsed, or none is configured for a database the local stack
            does not run (Informix, MongoDB).
    """
    if uri:
        return parse_connection(uri, default_database=spec.database, origin=origin or "explicit connection")
    var = connection_env(spec, role)
    value = _environ(environ).get(var)
    if value:
        return parse_connection(value, default_database=spec.database, origin=var)
    if dialect_name(spec.connector.value) not in STACK_DIALECTS:
        raise ConfigError(
            f"spec {spec.name}: set {var} or pass a connection URI (the local stack runs PostgreSQL and MariaDB, "
            f"not {spec.connector})"
        )
    return stack_connection(
        spec.connector.value, STACK_USERS[role], spec.database, origin=f"local stack (set {var} to override)"
    )


def stack_connection(
    dialect: str, user: str, database: str, *, origin: str = "local stack", stack: Stack | None = None
) -> SourceConnection:
    """A connection to the local stack's PostgreSQL or MariaDB as one of its users (``reader``, ``signal``,
    ``app``; see :mod:`cdclake.stack`).

    Args:
        dialect: ``postgresql``, or ``mysql``/``mariadb`` (the stack's MariaDB).
        user: the stack's name for the user.
        database: the database to connect to.
        origin: what to call the connection in messages.
        stack: a :class:`cdclake.stack.Stack`; default the one of ``CDC_STACK_DIR``.

    Raises:
        ConfigError: for a dialect the local stack does not run.
    """
    from cdclake.stack import Stack, StackConfig
    from cdclake.stack.config import password
    from cdclake.stack.mariadb import USER_NAMES
    from cdclake.stack.postgres import ROLE_NAMES

    name = dialect_name(dialect)
    if name not in STACK_DIALECTS:
        raise ConfigError(
            f"the local stack runs PostgreSQL and MariaDB, not {dialect}: configure the {dialect} connection "
            "(an AIRFLOW_CONN_* variable or an explicit URI)"
        )
    stack = stack or Stack(StackConfig.from_env())
    c = stack.config
    if name == "postgresql":
        login, port, secret = ROLE_NAMES[user], c.postgres_port, password(stack.secrets, "postgres", user)
    else:
        name, login, port = "mariadb", USER_NAMES[user], c.mariadb_port
        secret = password(stack.secrets, "mariadb", user)
    return SourceConnection(name, c.host, port, login, secret, database, origin=origin)
