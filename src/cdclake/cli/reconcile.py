"""``cdclake reconcile SOURCE``: compare the source database's tables with the lake's (counts, checksums, keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from cdclake.lake import LakeConfig

console = Console()

_STATUS_STYLE = {"equal": "[green]equal[/]", "different": "[bold red]different[/]", "skipped": "[dim]skipped[/]"}


def _key_text(key: tuple[str | None, ...]) -> str:
    return ", ".join("NULL" if v is None else v for v in key)


def print_report(report, show: int = 10) -> None:  # type: ignore[no-untyped-def]
    """Print a :class:`~cdclake.reconcile.ReconcileReport` as a rich table plus the differing keys."""
    console.print(f"source [bold]{report.source}[/]: {report.database}; lake {report.lake}", highlight=False)
    grid = Table("table", "status", "rows src/lake", "checksum", "missing/extra/diff", "lake batch @ watermark")
    grid.columns[0].no_wrap = True
    for t in report.tables:
        checksums = (
            "-"
            if t.status == "skipped"
            else (
                t.source_checksum[:8]
                if t.source_checksum == t.lake_checksum
                else f"{t.source_checksum[:8]}≠{t.lake_checksum[:8]}"
            )
        )
        frontier = t.frontier.batch_id or "-"
        if t.frontier.watermark:
            frontier += f" @ {t.frontier.watermark}"
        grid.add_row(
            t.lake_table,
            _STATUS_STYLE[t.status],
            f"{t.source_rows}/{t.lake_rows}",
            checksums,
            f"{len(t.missing_keys)}/{len(t.extra_keys)}/{len(t.different_keys)}",
            frontier,
        )
    console.print(grid)
    for t in report.tables:
        if t.note:
            console.print(f"[dim]{t.lake_table}: {t.note}[/]", highlight=False)
        if t.status != "different":
            continue
        if t.missing_columns:
            console.print(f"{t.lake_table}: source columns missing in the lake: {', '.join(t.missing_columns)}")
        key_names = ", ".join(t.key_columns)
        for label, keys in (
            ("in the source, not in the lake", t.missing_keys),
            ("in the lake, not in the source", t.extra_keys),
            ("rows differ", t.different_keys),
            ("duplicated in the lake", t.duplicate_keys),
        ):
            if not keys:
                continue
            shown = "; ".join(f"({_key_text(k)})" for k in keys[:show])
            more = f" … and {len(keys) - show} more" if len(keys) > show else ""
            console.print(f"{t.lake_table} [yellow]{label}[/] ({key_names}): {shown}{more}", highlight=False)
    if report.equal:
        console.print("[green]the lake matches the source[/] (at the lake's frontier shown above)")
    else:
        console.print(
            "[bold red]the lake differs from the source.[/] If the source was being written to, ingest and "
            "reconcile again once it is quiescent."
        )


def reconcile(
    source: str = typer.Argument(..., help="Connector spec name (include/connectors/NAME.yaml) or path."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]"),  # noqa: UP045
    tables: Optional[list[str]] = typer.Option(  # noqa: UP045
        None, "--tables", "-t", help="Only these tables (repeat or comma-separate; e.g. customers, inventory.orders)."
    ),
    show: int = typer.Option(10, "--show", "-n", help="How many differing keys to print per kind and table."),
    dsn: Optional[str] = typer.Option(  # noqa: UP045
        None,
        "--dsn",
        help="Source connection URI [default: env AIRFLOW_CONN_<CONNECTION_ID>_READER, else the local stack]",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Compare row counts, checksums and keys per table between the source database and the lake.

    Exits 1 when any table differs. The source should be quiescent (or the comparison repeated):
    the lake is compared as of its last ingested batch.
    """
    from cdclake.connectors import load_spec
    from cdclake.reconcile import reconcile_source

    names = [n.strip() for item in tables or () for n in item.split(",") if n.strip()]
    spec = load_spec(source)
    with Console(stderr=True).status(f"reconciling {spec.name}…"):
        report = reconcile_source(spec, lake=LakeConfig.from_env(lake), tables=names or None, dsn=dsn)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        print_report(report, show=show)
    raise typer.Exit(0 if report.equal else 1)
