"""PostgreSQL through psycopg: the catalog from ``information_schema`` and ``pg_catalog``, rows streamed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from cdclake.databases.base import SourceDatabase
from cdclake.databases.catalog import SourceColumn, SourceTable, optional_int
from cdclake.databases.connection import SourceConnection

_TABLE_QUERY = """
SELECT c.column_name, c.ordinal_position, c.data_type, format_type(a.atttypid, a.atttypmod),
       c.is_nullable = 'YES', c.numeric_precision, c.numeric_scale, c.datetime_precision
FROM information_schema.columns c
JOIN pg_catalog.pg_namespace n ON n.nspname = c.table_schema
JOIN pg_catalog.pg_class t ON t.relnamespace = n.oid AND t.relname = c.table_name
JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attname = c.column_name
WHERE c.table_schema = %s AND c.table_name = %s
ORDER BY c.ordinal_position
"""

_PRIMARY_KEY_QUERY = """
SELECT a.attname
FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass AND i.indisprimary
ORDER BY array_position(i.indkey, a.attnum)
"""


def _identifier(namespace: str, table: str) -> Any:
    from psycopg import sql

    return sql.Identifier(*(part for part in (namespace, table) if part))


class _PostgresDatabase(SourceDatabase):
    """A psycopg connection; ``statement_timeout`` and (with ``utc``) ``TimeZone`` are set as connection options."""

    driver = "psycopg"

    @classmethod
    def _connect(cls, source: SourceConnection, *, utc: bool) -> Any:
        import psycopg

        options = f"-c statement_timeout={round(source.statement_timeout_s * 1000)}"
        if utc:
            options += " -c TimeZone=UTC"
        return psycopg.connect(
            host=source.host,
            port=source.port,
            user=source.user,
            password=source.password,
            dbname=source.database,
            connect_timeout=source.connect_timeout_s,
            autocommit=True,
            options=options,
        )

    def table(self, namespace: str, table: str) -> SourceTable:
        rows = self.dbapi.execute(_TABLE_QUERY, [namespace, table]).fetchall()
        columns = tuple(
            SourceColumn(
                name=r[0],
                ordinal=int(r[1]),
                data_type=r[2],
                native_type=r[3],
                nullable=bool(r[4]),
                numeric_precision=optional_int(r[5]),
                numeric_scale=optional_int(r[6]),
                datetime_precision=optional_int(r[7]),
            )
            for r in rows
        )
        return SourceTable(namespace, table, columns)

    def primary_key(self, namespace: str, table: str) -> list[str]:
        return [r[0] for r in self.dbapi.execute(_PRIMARY_KEY_QUERY, [namespace, table]).fetchall()]

    def rows(
        self, namespace: str, table: str, columns: Sequence[str], order_by: Sequence[str] = ()
    ) -> Iterator[tuple[Any, ...]]:
        from psycopg import sql

        query = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in columns), _identifier(namespace, table)
        )
        if order_by:
            query += sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(sql.Identifier(c) for c in order_by))
        with self.dbapi.cursor() as cur:
            yield from cur.stream(query)

    def row_count(self, namespace: str, table: str) -> int:
        from psycopg import sql

        query = sql.SQL("SELECT COUNT(*) FROM {}").format(_identifier(namespace, table))
        return int(self.dbapi.execute(query).fetchone()[0])
