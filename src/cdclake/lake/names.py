"""Names in the lake, defined once: one Iceberg table per captured table, its tombstone side table, and the
audit namespace.

A captured table ``<schema-or-database>.<table>`` of a spec whose topic prefix is ``<prefix>`` becomes the
Iceberg table ``lake.<prefix>.<schema-or-database>.<table>`` (a two-level namespace); for Informix the owner
takes the place of the schema, as in its topic names. Each part has the characters outside
``[A-Za-z0-9_]`` replaced by ``_``. An upsert table's delete tombstones live beside it in
``<table>__cdc_deletes``. Audit tables are ``lake.cdc_audit.<name>`` (:mod:`cdclake.lake.audit`).

Three spellings are used: the identifier with catalog (``lake.pg.inventory.customers``, what users, Airflow
Assets and summaries see), without it (what pyiceberg and Iceberg procedures take,
:func:`catalog_identifier`) and quoted Spark SQL (:func:`sql_name`, quoted by :func:`cdclake.sql.quote_name`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from cdclake.connectors.spec import ConnectorKind
from cdclake.lake.catalog import AUDIT_NAMESPACE, CATALOG_NAME
from cdclake.sql import quote_name

if TYPE_CHECKING:
    from cdclake.connectors.spec import ConnectorSpec
    from cdclake.decode.options import TableId

TOMBSTONE_SUFFIX = "__cdc_deletes"

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")

__all__ = [
    "AUDIT_NAMESPACE",
    "CATALOG_NAME",
    "TOMBSTONE_SUFFIX",
    "audit_table",
    "catalog_identifier",
    "spec_table_identifier",
    "spec_table_parts",
    "sql_name",
    "table_identifier",
    "table_parts",
    "tombstone_identifier",
    "with_catalog",
]


def _part(name: str) -> str:
    return _UNSAFE.sub("_", name)


def table_parts(table_id: TableId) -> tuple[str, ...]:
    """Namespace parts plus table name of a decoded table, e.g. ``("pg", "inventory", "customers")``."""
    return tuple(_part(p) for p in (table_id.server, table_id.namespace, table_id.table) if p)


def spec_table_parts(spec: ConnectorSpec, data_collection: str) -> tuple[str, ...]:
    """Namespace parts plus table name of a table a spec captures (the same as its decoded events').

    Raises:
        KeyError: when the spec does not capture ``data_collection``.
    """
    spec.table(data_collection)  # raises KeyError naming the spec's tables
    parts = data_collection.split(".")
    if spec.connector is ConnectorKind.INFORMIX and len(parts) == 3:
        parts = parts[1:]
    return (_part(spec.topic_prefix), *(_part(p) for p in parts))


def table_identifier(table_id: TableId) -> str:
    """``lake.<prefix>.<schema>.<table>`` of a decoded table."""
    return ".".join((CATALOG_NAME, *table_parts(table_id)))


def spec_table_identifier(spec: ConnectorSpec, data_collection: str) -> str:
    """``lake.<prefix>.<schema>.<table>`` of a table a spec captures.

    Raises:
        KeyError: when the spec does not capture ``data_collection``.
    """
    return ".".join((CATALOG_NAME, *spec_table_parts(spec, data_collection)))


def sql_name(table_id: TableId, suffix: str = "") -> str:
    """Quoted Spark SQL name of a decoded table (or of a side table with ``suffix``)."""
    parts = table_parts(table_id)
    return quote_name((CATALOG_NAME, *parts[:-1], parts[-1] + suffix))


def audit_table(name: str) -> str:
    """Quoted Spark SQL name of an audit table, e.g. ``lake.cdc_audit.batches``."""
    return quote_name((CATALOG_NAME, AUDIT_NAMESPACE, name))


def catalog_identifier(identifier: str) -> str:
    """The identifier without the catalog (what pyiceberg's ``load_table`` and Iceberg procedures take)."""
    prefix = f"{CATALOG_NAME}."
    return identifier[len(prefix) :] if identifier.startswith(prefix) else identifier


def with_catalog(identifier: str) -> str:
    """The identifier with the catalog, from a name with or without it."""
    return identifier if identifier.startswith(f"{CATALOG_NAME}.") else f"{CATALOG_NAME}.{identifier}"


def tombstone_identifier(identifier: str) -> str:
    """``lake.<prefix>.<schema>.<table>__cdc_deletes``: the side table of an upsert table's delete tombstones."""
    return f"{CATALOG_NAME}.{catalog_identifier(identifier)}{TOMBSTONE_SUFFIX}"
