"""Names in the lake: one Iceberg table per captured source table, plus the audit namespace.

A source table ``<topic.prefix>.<schema-or-database>.<table>`` becomes the Iceberg table
``lake.<topic.prefix>.<schema-or-database>.<table>`` (a two-level namespace). Its delete tombstones
live beside it in ``<table>__cdc_deletes``. Audit tables are in namespace ``cdc_audit``.
"""

from __future__ import annotations

import re

from cdclake.decode.options import TableId
from cdclake.lake.catalog import AUDIT_NAMESPACE, CATALOG_NAME

TOMBSTONE_SUFFIX = "__cdc_deletes"

#: Metadata columns of every upsert table (after the source columns).
META_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_cdc_op", "STRING"),
    ("_cdc_source_ts", "TIMESTAMP"),
    ("_cdc_position", "ARRAY<DECIMAL(38,0)>"),
    ("_cdc_tx_id", "STRING"),
    ("_cdc_topic", "STRING"),
    ("_cdc_partition", "INT"),
    ("_cdc_offset", "BIGINT"),
    ("_cdc_ingested_at", "TIMESTAMP"),
)
META_NAMES = tuple(name for name, _ in META_COLUMNS)

_SAFE = re.compile(r"[^A-Za-z0-9_]")


__all__ = [
    "AUDIT_NAMESPACE",
    "META_COLUMNS",
    "META_NAMES",
    "TOMBSTONE_SUFFIX",
    "audit_table",
    "quote",
    "sql_name",
    "table_identifier",
    "table_parts",
]


def _part(name: str) -> str:
    return _SAFE.sub("_", name)


def table_parts(table_id: TableId) -> tuple[str, ...]:
    """Namespace parts plus table name, e.g. ``("pg", "inventory", "customers")``."""
    return tuple(_part(p) for p in (table_id.server, table_id.namespace, table_id.table) if p)


def quote(parts: tuple[str, ...]) -> str:
    """Spark SQL identifier with every part back-quoted."""
    return ".".join(f"`{p}`" for p in parts)


def table_identifier(table_id: TableId) -> str:
    """``lake.<prefix>.<schema>.<table>`` (unquoted, as reported to users and Airflow assets)."""
    return ".".join((CATALOG_NAME, *table_parts(table_id)))


def sql_name(table_id: TableId, suffix: str = "") -> str:
    """Quoted Spark SQL name of the table (or of a side table with ``suffix``)."""
    parts = table_parts(table_id)
    return quote((CATALOG_NAME, *parts[:-1], parts[-1] + suffix))


def audit_table(name: str) -> str:
    """Quoted Spark SQL name of an audit table, e.g. ``lake.cdc_audit.batches``."""
    return quote((CATALOG_NAME, AUDIT_NAMESPACE, name))
