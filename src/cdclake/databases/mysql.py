"""MySQL and MariaDB through PyMySQL: the catalog from ``information_schema``, rows streamed (unbuffered cursor)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from cdclake.databases.base import SourceDatabase
from cdclake.databases.catalog import SourceColumn, SourceTable, optional_int
from cdclake.databases.connection import SourceConnection
from cdclake.sql import quote_identifier

_TABLE_QUERY = """
SELECT column_name, ordinal_position, data_type, column_type, is_nullable = 'YES',
       numeric_precision, numeric_scale, datetime_precision, character_maximum_length
FROM information_schema.columns
WHERE table_schema = %s AND table_name = %s
ORDER BY ordinal_position
"""

_PRIMARY_KEY_QUERY = """
SELECT column_name FROM information_schema.key_column_usage
WHERE table_schema = %s AND table_name = %s AND constraint_name = 'PRIMARY'
ORDER BY ordinal_position
"""


_MEMBER = re.compile(r"'((?:[^'\\]|''|\\.)*)'")
_UNESCAPE = re.compile(r"''|\\(.)")


def enum_members(column_type: str) -> tuple[str, ...]:
    """The members of an ``enum('a','b')`` or ``set('a','b')`` column type, in declared order (quotes undone)."""
    lowered = column_type.lower()
    if not lowered.startswith(("enum(", "set(")):
        return ()
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(
        _UNESCAPE.sub(lambda m: "'" if m.group(0) == "''" else m.group(1), member) for member in _MEMBER.findall(body)
    )


def _text(value: Any) -> str:
    """An ``information_schema`` string (some servers send ``column_type`` as bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _column(r: Sequence[Any]) -> SourceColumn:
    """One row of :data:`_TABLE_QUERY` as a column (``UNSIGNED`` and enum/set members read from ``column_type``)."""
    column_type = _text(r[3])
    return SourceColumn(
        name=_text(r[0]),
        ordinal=int(r[1]),
        data_type=_text(r[2]),
        native_type=column_type,
        nullable=bool(r[4]),
        numeric_precision=optional_int(r[5]),
        numeric_scale=optional_int(r[6]),
        datetime_precision=optional_int(r[7]),
        character_length=optional_int(r[8]),
        enum_values=enum_members(column_type),
        unsigned=" unsigned" in column_type.lower(),
    )


def _target(namespace: str, table: str) -> str:
    return ".".join(quote_identifier(part) for part in (namespace, table) if part)


def _statement_timeout(server_info: str, seconds: float) -> str:
    """The session setting that cancels long statements: MariaDB's ``max_statement_time`` (seconds), MySQL's
    ``max_execution_time`` (milliseconds, read-only statements)."""
    if "mariadb" in server_info.lower():
        return f"SET SESSION max_statement_time = {seconds:g}"
    return f"SET SESSION max_execution_time = {round(seconds * 1000)}"


class _MySqlDatabase(SourceDatabase):
    """A PyMySQL connection: the server cancels statements over the statement timeout; ``read_timeout`` (the
    statement timeout plus the connect timeout, so that the server's error arrives first) bounds every read."""

    driver = "pymysql"

    @classmethod
    def _connect(cls, source: SourceConnection, *, utc: bool) -> Any:
        import pymysql

        seconds = source.statement_timeout_s
        conn = pymysql.connect(
            host=source.host,
            port=source.port,
            user=source.user,
            password=source.password,
            database=source.database,
            connect_timeout=source.connect_timeout_s,
            read_timeout=seconds + source.connect_timeout_s if seconds else None,
            autocommit=True,
            charset="utf8mb4",
        )
        with conn.cursor() as cur:
            if seconds:
                cur.execute(_statement_timeout(str(conn.get_server_info()), seconds))
            if utc:
                # TIMESTAMP columns come back naive in the session's zone: make it UTC, like Debezium's values
                cur.execute("SET time_zone = '+00:00'")
        return conn

    def _fetch(self, query: str, args: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.dbapi.cursor() as cur:
            cur.execute(query, args)
            return list(cur.fetchall())

    def table(self, namespace: str, table: str) -> SourceTable:
        return SourceTable(namespace, table, tuple(_column(r) for r in self._fetch(_TABLE_QUERY, [namespace, table])))

    def primary_key(self, namespace: str, table: str) -> list[str]:
        return [_text(r[0]) for r in self._fetch(_PRIMARY_KEY_QUERY, [namespace, table])]

    def rows(
        self, namespace: str, table: str, columns: Sequence[str], order_by: Sequence[str] = ()
    ) -> Iterator[tuple[Any, ...]]:
        import pymysql.cursors

        query = f"SELECT {', '.join(quote_identifier(c) for c in columns)} FROM {_target(namespace, table)}"
        if order_by:
            query += f" ORDER BY {', '.join(quote_identifier(c) for c in order_by)}"
        with self.dbapi.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(query)
            yield from cur

    def row_count(self, namespace: str, table: str) -> int:
        return int(self._fetch(f"SELECT COUNT(*) FROM {_target(namespace, table)}")[0][0])
