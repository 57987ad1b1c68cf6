"""``cdclake lake info | tables | show``: inspect the lake through pyiceberg (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from cdclake.lake import LakeConfig

app = typer.Typer(help="Inspect the Iceberg lake.")
console = Console()
LakeDir = typer.Option(None, "--lake", help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]")


def _catalog(lake: Optional[Path]):  # type: ignore[no-untyped-def]  # noqa: UP045
    return LakeConfig.from_env(lake).open_catalog()


def _all_tables(catalog) -> list[tuple[str, ...]]:  # type: ignore[no-untyped-def]
    found: list[tuple[str, ...]] = []
    todo = [()]
    while todo:
        ns = todo.pop()
        children = catalog.list_namespaces(ns) if ns else catalog.list_namespaces()
        for child in children:
            todo.append(tuple(child))
        if ns:
            found += [tuple(t) for t in catalog.list_tables(ns)]
    return sorted(set(found))


@app.command()
def info(lake: Optional[Path] = LakeDir, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:  # noqa: UP045
    """How pyiceberg and DuckDB read this lake.

    --json prints {"kind", "pyiceberg": properties for `pyiceberg.catalog.load_catalog(**props)`, "duckdb":
    {"extensions", "setup": statements (a REST lake's S3 secret and ATTACH), "tables": the expression that reads each
    table}}, secrets included. Without it, the pyiceberg properties, secrets masked.
    """
    from cdclake.lake.readers import reader_info

    config = LakeConfig.from_env(lake)
    if as_json:
        catalog = _catalog(lake)
        typer.echo(json.dumps(reader_info(config, catalog, _all_tables(catalog)), indent=2))
        return
    for key, value in config.pyiceberg_properties().items():
        shown = "***" if "secret" in key or "password" in key else value
        console.print(f"{key} = {shown}", highlight=False)


@app.command()
def tables(lake: Optional[Path] = LakeDir) -> None:  # noqa: UP045
    """List every table of the lake with its row count and last snapshot."""
    catalog = _catalog(lake)
    out = Table("table", "rows", "snapshots", "last batch", "format")
    for ident in _all_tables(catalog):
        table = catalog.load_table(ident)
        snap = table.current_snapshot()
        rows = snap.summary.additional_properties.get("total-records", "?") if snap else "0"
        batch = snap.summary.additional_properties.get("cdc.batch-id", "-") if snap else "-"
        out.add_row(
            "lake." + ".".join(ident),
            str(rows),
            str(len(table.metadata.snapshots)),
            batch,
            f"v{table.metadata.format_version}",
        )
    console.print(out)


@app.command()
def show(
    table: str = typer.Argument(..., help="Table, e.g. lake.pg.inventory.customers (the 'lake.' is optional)."),
    limit: int = typer.Option(20, help="Rows to print."),
    lake: Optional[Path] = LakeDir,  # noqa: UP045
) -> None:
    """Schema, identifier fields, last snapshot summary and the first rows of a table."""
    catalog = _catalog(lake)
    ident = tuple(table.removeprefix("lake.").split("."))
    tbl = catalog.load_table(ident)
    console.print(f"[bold]lake.{'.'.join(ident)}[/] (format v{tbl.metadata.format_version})")
    console.print(str(tbl.schema()), highlight=False)
    if tbl.spec().fields:
        console.print(f"partitioned by: {tbl.spec()}", highlight=False)
    snap = tbl.current_snapshot()
    if snap:
        console.print(json.dumps(dict(snap.summary.additional_properties), indent=1, sort_keys=True), highlight=False)
    arrow = tbl.scan(limit=limit).to_arrow()
    grid = Table(*arrow.column_names)
    for row in arrow.to_pylist():
        grid.add_row(*[str(v) for v in row.values()])
    console.print(grid)
