"""How engines outside cdclake read the lake: pyiceberg and DuckDB (``cdclake lake info --json`` prints both).

* pyiceberg: ``load_catalog(**props)`` with :meth:`LakeConfig.pyiceberg_properties`.
* DuckDB with its ``iceberg`` extension (and ``httpfs`` and ``avro``):
  * a REST lake is attached as a catalog: an S3 secret for the warehouse's object store, then ``ATTACH ... (TYPE
    iceberg)``; a table is ``lake."<namespace>".<table>``, the namespace's levels joined by dots
    (``lake."pg.inventory".customers``);
  * the embedded lake's SQLite catalog is not one DuckDB attaches, so each table is read from its current metadata
    file: ``iceberg_scan('<metadata location>')``.

:func:`duckdb_setup` and :func:`duckdb_table` are pure; :func:`reader_info` asks the catalog for its tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cdclake.lake.catalog import CATALOG_NAME, LakeConfig

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

#: The DuckDB extensions that read the lake.
DUCKDB_EXTENSIONS = ("httpfs", "avro", "iceberg")


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_name(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def duckdb_setup(lake: LakeConfig) -> list[str]:
    """The DuckDB statements, after loading :data:`DUCKDB_EXTENSIONS`, that make :func:`duckdb_table` readable: for a
    REST lake, the object store's S3 secret and the ``ATTACH`` of the catalog as ``lake``; none for the embedded one.
    """
    if lake.kind == "embedded":
        return []
    statements = []
    if lake.s3:
        endpoint = urlsplit(lake.s3.get("s3.endpoint", ""))
        options = [
            "TYPE s3",
            f"KEY_ID {_sql_text(lake.s3.get('s3.access-key-id', ''))}",
            f"SECRET {_sql_text(lake.s3.get('s3.secret-access-key', ''))}",
            f"REGION {_sql_text(lake.s3.get('s3.region', 'us-east-1'))}",
        ]
        if endpoint.netloc:
            options += [
                f"ENDPOINT {_sql_text(endpoint.netloc)}",
                f"USE_SSL {'true' if endpoint.scheme == 'https' else 'false'}",
            ]
        if lake.s3.get("s3.path-style-access") == "true":
            options.append("URL_STYLE 'path'")
        statements.append(f"CREATE OR REPLACE SECRET {CATALOG_NAME}_s3 ({', '.join(options)})")
    statements.append(
        f"ATTACH {_sql_text(lake.warehouse or '')} AS {CATALOG_NAME} "
        f"(TYPE iceberg, ENDPOINT {_sql_text(str(lake.uri))}, AUTHORIZATION_TYPE 'none')"
    )
    return statements


def duckdb_table(lake: LakeConfig, identifier: Sequence[str], metadata_location: str) -> str:
    """The DuckDB expression that reads one table (``identifier`` without the catalog's name)."""
    if lake.kind == "embedded":
        return f"iceberg_scan({_sql_text(metadata_location)})"
    *namespace, table = identifier
    return f"{CATALOG_NAME}.{_sql_name('.'.join(namespace))}.{_sql_name(table)}"


def reader_info(lake: LakeConfig, catalog: Catalog, tables: Sequence[tuple[str, ...]]) -> dict[str, Any]:
    """What ``cdclake lake info --json`` prints: the lake's kind, pyiceberg's properties, and DuckDB's extensions,
    set-up statements and one expression per table (keyed ``<namespace>.<table>``)."""
    return {
        "kind": lake.kind,
        "pyiceberg": lake.pyiceberg_properties(),
        "duckdb": {
            "extensions": list(DUCKDB_EXTENSIONS),
            "setup": duckdb_setup(lake),
            "tables": {
                ".".join(ident): duckdb_table(lake, ident, catalog.load_table(ident).metadata_location)
                for ident in tables
            },
        },
    }
