"""Reading the lake as an outside user would, from what `cdclake lake info --json` prints: pyiceberg and DuckDB."""

from __future__ import annotations

from typing import Any


def open_duckdb(info: dict[str, Any]) -> Any:
    """A DuckDB connection set up as ``info["duckdb"]`` says, its extensions installed from the
    ``duckdb-extension-*`` Python packages (DuckDB's extension server cannot be reached here)."""
    import duckdb
    from duckdb_extensions import import_extension

    connection = duckdb.connect()
    for extension in info["duckdb"]["extensions"]:
        import_extension(extension)
        connection.execute(f"LOAD {extension}")
    for statement in info["duckdb"]["setup"]:
        connection.execute(statement)
    return connection


def duckdb_rows(info: dict[str, Any], table: str, columns: str) -> list[tuple[Any, ...]]:
    """``SELECT columns`` of ``table`` (``<namespace>.<table>``) through DuckDB, sorted."""
    connection = open_duckdb(info)
    try:
        return sorted(connection.sql(f"SELECT {columns} FROM {info['duckdb']['tables'][table]}").fetchall())
    finally:
        connection.close()


def pyiceberg_rows(info: dict[str, Any], table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """``columns`` of ``table`` through pyiceberg with ``info["pyiceberg"]``, sorted."""
    from pyiceberg.catalog import load_catalog

    arrow = load_catalog(**info["pyiceberg"]).load_table(table).scan(selected_fields=tuple(columns)).to_arrow()
    return sorted(zip(*(arrow.column(c).to_pylist() for c in columns), strict=True))
