"""``cdclake audit``: a readable summary of the last batches (from ``lake.cdc_audit.batches``).

The batches are read by :meth:`cdclake.monitor.LakeMonitor.batches` (what Airflow's CDC view shows).
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
from cdclake.monitor import Batch, LakeMonitor

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

    from cdclake.ingest.ledger import BATCHES

    config = LakeConfig.from_env(lake)
    monitor = LakeMonitor(config, load_catalog(**config.pyiceberg_properties()))
    if not monitor.has_table(BATCHES):
        console.print("no batches yet (lake.cdc_audit.batches does not exist)")
        raise typer.Exit(0)
    batches = [b for b in reversed(monitor.batches(source or None, last)) if b.summary]
    if as_json:
        typer.echo(json.dumps([_as_json(b, per_table) for b in batches], indent=2))
        return
    grid = Table(
        "recorded", "source", "batch", "records", "applied", "skipped", "dead", "tx c/h/m/e", "problems", "seconds"
    )
    for b in batches:
        grid.add_row(
            str(b.committed_at)[:19],
            b.source,
            b.batch_id,
            str(b.records),
            str(b.applied),
            str(b.skipped),
            str(b.dead_lettered),
            "/".join(str(b.transactions[k]) for k in ("complete", "held", "mismatched", "expired")),
            "[red]" + "; ".join(b.problems) + "[/]" if b.problems else "-",
            f"{sum(b.phases.values()):.1f}",
        )
    console.print(grid)
    if per_table:
        console.print(_table_counts(batches))


def _as_json(batch: Batch, per_table: bool) -> dict[str, Any]:
    """The batch's summary as it wrote it, with when it was recorded (and its per-table counts)."""
    out = batch.summary | {"recorded_at": str(batch.committed_at)}
    return out | {"table_counts": batch.table_counts} if per_table else out


def _table_counts(batches: list[Batch]) -> Table:
    """One row per batch, table and op (``op`` "-": the table's undecodable records)."""
    columns = ("decoded", "held", "applied", "skipped", "quarantined", "dead_lettered")
    grid = Table("batch", "table", "op", *columns)
    for b in batches:
        for c in b.table_counts:
            grid.add_row(b.batch_id, c["table"], c["op"] or "-", *(str(c[k]) for k in columns))
    return grid
