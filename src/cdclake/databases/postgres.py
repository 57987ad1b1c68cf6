"""PostgreSQL through psycopg: the catalog from ``information_schema`` and ``pg_catalog`` (with each column's
type resolved: domains, array elements, enum labels), rows streamed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from cdclake.databases.base import SourceDatabase
from cdclake.databases.catalog import SourceColumn, SourceTable, optional_int
from cdclake.databases.connection import SourceConnection

# Domains resolve to their base type (the first type modifier down the chain of domains applies); an array's
# element type is read with the array's modifier; enum labels come in their declared order.
_TABLE_QUERY = """
WITH RECURSIVE domains(oid, base, typmod) AS (
    SELECT t.oid, t.typbasetype, t.typtypmod FROM pg_catalog.pg_type t WHERE t.typtype = 'd'
  UNION ALL
    SELECT d.oid, t.typbasetype, CASE WHEN d.typmod = -1 THEN t.typtypmod ELSE d.typmod END
    FROM domains d JOIN pg_catalog.pg_type t ON t.oid = d.base WHERE t.typtype = 'd'
),
roots AS (
    SELECT d.oid, d.base, d.typmod FROM domains d JOIN pg_catalog.pg_type b ON b.oid = d.base WHERE b.typtype <> 'd'
)
SELECT c.column_name, c.ordinal_position, c.data_type, format_type(a.atttypid, a.atttypmod),
       c.is_nullable = 'YES', c.numeric_precision, c.numeric_scale, c.datetime_precision,
       c.character_maximum_length,
       CASE WHEN ty.typtype = 'd' THEN format_type(ty.oid, NULL) END,
       rt.typname, rt.typtype, rt.typcategory,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = rt.oid),
       et.typname, et.typtype, et.typcategory, format_type(et.oid, NULL), format_type(et.oid, r.typmod),
       information_schema._pg_numeric_precision(et.oid, r.typmod),
       information_schema._pg_numeric_scale(et.oid, r.typmod),
       information_schema._pg_datetime_precision(et.oid, r.typmod),
       information_schema._pg_char_max_length(et.oid, r.typmod),
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = et.oid)
FROM information_schema.columns c
JOIN pg_catalog.pg_namespace n ON n.nspname = c.table_schema
JOIN pg_catalog.pg_class t ON t.relnamespace = n.oid AND t.relname = c.table_name
JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attname = c.column_name
JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
LEFT JOIN roots rd ON rd.oid = a.atttypid
CROSS JOIN LATERAL (
    SELECT COALESCE(rd.base, a.atttypid) AS oid, CASE WHEN rd.oid IS NULL THEN a.atttypmod ELSE rd.typmod END AS typmod
) r
JOIN pg_catalog.pg_type rt ON rt.oid = r.oid
LEFT JOIN pg_catalog.pg_type et ON et.oid = rt.typelem AND rt.typcategory = 'A'
WHERE c.table_schema = %s AND c.table_name = %s
ORDER BY c.ordinal_position
"""

#: ``pg_type.typtype`` codes and the :attr:`SourceColumn.type_kind` each one is (arrays are base types of
#: category ``A``).
_TYPE_KINDS = {
    "b": "base",
    "e": "enum",
    "c": "composite",
    "r": "range",
    "m": "multirange",
    "p": "pseudo",
    "d": "domain",
}


def _type_kind(typtype: str | None, category: str | None) -> str | None:
    if typtype is None:
        return None
    if typtype == "b" and category == "A":
        return "array"
    return _TYPE_KINDS.get(typtype, typtype)


def _column(r: Sequence[Any]) -> SourceColumn:
    """One row of :data:`_TABLE_QUERY` as a column (its element too, for an array)."""
    element = None
    if r[14] is not None:
        element = SourceColumn(
            name=r[0],
            ordinal=int(r[1]),
            data_type=r[17],
            native_type=r[18],
            nullable=True,
            numeric_precision=optional_int(r[19]),
            numeric_scale=optional_int(r[20]),
            datetime_precision=optional_int(r[21]),
            character_length=optional_int(r[22]),
            type_name=r[14],
            type_kind=_type_kind(r[15], r[16]),
            enum_values=tuple(r[23] or ()),
        )
    return SourceColumn(
        name=r[0],
        ordinal=int(r[1]),
        data_type=r[2],
        native_type=r[3],
        nullable=bool(r[4]),
        numeric_precision=optional_int(r[5]),
        numeric_scale=optional_int(r[6]),
        datetime_precision=optional_int(r[7]),
        character_length=optional_int(r[8]),
        domain=r[9],
        type_name=r[10],
        type_kind=_type_kind(r[11], r[12]),
        enum_values=tuple(r[13] or ()),
        element=element,
    )


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
        return SourceTable(namespace, table, tuple(_column(r) for r in rows))

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
