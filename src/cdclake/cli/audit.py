"""``cdclake audit``: a readable summary of the last batches (from ``lake.cdc_audit.batches``).

``--tables`` adds the per-table, per-op counts of each batch (the ledger's typed ``table_counts``
column; batches written before it existed have none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from cdclake.lake import LakeConfig

console = Console()


def audit(
    source: Optional[str] = typer.Argument(None, help="Only this source (spec name / topic prefix)."),  # noqa: UP045
    last: int = typer.Option(10, "--last", "-n", help="How many batches."),
    lake: Optional[Path] = typer.Option(None, "--lake", help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]"),  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print the batch summaries as JSON."),
    per_table: bool = typer.Option(False, "--tables", help="Also the events per table and op of each batch."),
) -> None:
    """Last batches: offsets read, events applied/skipped/dead-lettered, transactions, problems, durations."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog(**LakeConfig.from_env(lake).pyiceberg_properties())
    try:
        table = catalog.load_table(("cdc_audit", "batches"))
    except NoSuchTableError:
        console.print("no batches yet (lake.cdc_audit.batches does not exist)")
        raise typer.Exit(0) from None
    row_filter = "status == 'committed'" + (f" and source == '{source}'" if source else "")
    rows = sorted(table.scan(row_filter=row_filter).to_arrow().to_pylist(), key=lambda r: r["recorded_at"])[-last:]
    rows = [r for r in rows if r["summary"]]
    summaries = [json.loads(r["summary"]) | {"recorded_at": str(r["recorded_at"])} for r in rows]
    if per_table:
        summaries = [s | {"table_counts": r.get("table_counts")} for s, r in zip(summaries, rows, strict=True)]
    if as_json:
        typer.echo(json.dumps(summaries, indent=2))
        return
    grid = Table(
        "recorded", "source", "batch", "records", "applied", "skipped", "dead", "tx c/h/m/e", "problems", "seconds"
    )
    for s in summaries:
        tables = s.get("tables", {})
        tx = s.get("transactions", {}).get("counts", {})
        problems = s.get("reconciliation", {}).get("problems", [])
        grid.add_row(
            s["recorded_at"][:19],
            s["source"],
            s["batch_id"],
            str(s.get("records", 0)),
            str(sum(t.get("applied", 0) for t in tables.values())),
            str(sum(t.get("skipped", 0) for t in tables.values())),
            str(s.get("dead_lettered", 0)),
            "/".join(str(tx.get(k, 0)) for k in ("complete", "held", "mismatched", "expired")),
            "[red]" + "; ".join(problems) + "[/]" if problems else "-",
            f"{sum(s.get('phases_s', {}).values()):.1f}",
        )
    console.print(grid)
    if per_table:
        console.print(_table_counts(summaries))


def _table_counts(summaries: list[dict[str, Any]]) -> Table:
    """One row per batch, table and op (``op`` "-": the table's undecodable records)."""
    columns = ("decoded", "held", "applied", "skipped", "quarantined", "dead_lettered")
    grid = Table("batch", "table", "op", *columns)
    for s in summaries:
        for c in s.get("table_counts") or []:
            grid.add_row(s["batch_id"], c["table"], c["op"] or "-", *(str(c[k]) for k in columns))
    return grid
