"""``cdclake quarantine list | release``: tables whose events are held after a schema change, and their release.

Both read and write the lake's audit tables through pyiceberg (no Spark): ``list`` shows what
:meth:`cdclake.monitor.LakeMonitor.quarantine` reads (as Airflow's CDC view does). The release itself is
applied by the next ingest batch of the table's source (:mod:`cdclake.ingest.quarantine`, imported lazily:
it pulls in PySpark).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cdclake.lake import LakeConfig
from cdclake.monitor import LakeMonitor

if TYPE_CHECKING:
    from cdclake.ingest.quarantine import QuarantineState

app = typer.Typer(help="Tables held in quarantine after a schema change, and their release.", no_args_is_help=True)
console = Console()
LakeDir = typer.Option(None, "--lake", help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]")
SourceOption = typer.Option(None, "--source", help="Only this source (spec name / topic prefix).")
#: the values of :class:`cdclake.ingest.quarantine.ReleaseAction`
ACTIONS = ("evolve", "recreate", "discard")


def _action(value: str) -> str:
    if value.lower() not in ACTIONS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(ACTIONS)}")
    return value.lower()


def _catalog(lake: Optional[Path]):  # type: ignore[no-untyped-def]  # noqa: UP045
    from pyiceberg.catalog import load_catalog

    return load_catalog(**LakeConfig.from_env(lake).pyiceberg_properties())


def _as_json(state: QuarantineState) -> dict[str, Any]:
    def release(rec: Any) -> dict[str, Any] | None:
        if rec is None:
            return None
        return {
            "release_id": rec.release_id,
            "action": rec.action.value,
            "status": rec.status.value,
            "recorded_at": str(rec.recorded_at),
            "batch_id": rec.batch_id,
            "detail": rec.detail,
        }

    return {
        "table": state.table,
        "source": state.source,
        "reason": state.reason,
        "records": state.records,
        "batches": list(state.batches),
        "since": str(state.since),
        "pending_release": release(state.release),
        "last_failed_release": release(state.failure),
    }


@app.command("list")
def list_(
    source: Optional[str] = SourceOption,  # noqa: UP045
    lake: Optional[Path] = LakeDir,  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Quarantined tables: why, since when, how many records are held, and any pending or failed release."""
    states = LakeMonitor(LakeConfig.from_env(lake), _catalog(lake)).quarantine(source)
    if as_json:
        typer.echo(json.dumps([_as_json(s) for s in states], indent=2))
        return
    if not states:
        console.print("no quarantined tables")
        return
    grid = Table("table", "source", "since", "batches", "held records", "reason", "release")
    for s in states:
        if s.release is not None:
            release = f"{s.release.action.value} pending (next batch)"
        elif s.failure is not None:
            release = f"[red]{s.failure.action.value} failed in batch {s.failure.batch_id}: {escape(s.failure.detail or '')}[/]"
        else:
            release = "-"
        grid.add_row(
            s.table, s.source, str(s.since)[:19], str(len(s.batches)), str(s.records), escape(s.reason), release
        )
    console.print(grid)


def release(
    table: str = typer.Argument(..., help="Quarantined table, e.g. lake.pg.inventory.customers ('lake.' optional)."),
    action: str = typer.Option(
        ...,
        "--action",
        metavar="|".join(ACTIONS),
        callback=_action,
        help="evolve: apply the held events to the table as it is now (alter an incompatible column first); "
        "recreate: set the table aside and create it anew from its events (then re-snapshot it); "
        "discard: do not apply the held events (they are copied to cdc_audit.dead_letters) and resume the "
        "table with its new events (then re-snapshot it).",
    ),
    source: Optional[str] = SourceOption,  # noqa: UP045
    note: Optional[str] = typer.Option(None, help="Why, for the audit (kept with the request)."),  # noqa: UP045
    lake: Optional[Path] = LakeDir,  # noqa: UP045
) -> None:
    """Release a quarantined table: the next ingest batch of its source applies (discard: dead-letters) the held events."""
    from cdclake.ingest.quarantine import ReleaseAction, request_release

    state, request = request_release(_catalog(lake), table, ReleaseAction(action), source=source, note=note)
    replaced = " (replaces the pending request)" if state.release is not None else ""
    console.print(
        f"release {request.release_id} of [bold]{state.table}[/] ({request.action.value}) recorded{replaced}: the next batch of source "
        f"{state.source} (`cdclake ingest --spec {state.source}` or the cdc_ingest__{state.source} DAG) "
        f"applies its {state.records} held record(s) from {len(state.batches)} batch(es); "
        f"`cdclake quarantine list` shows the outcome if it fails.",
        highlight=False,
    )
    if request.action is ReleaseAction.DISCARD:
        console.print(
            "the held records will be copied to lake.cdc_audit.dead_letters and not applied; re-snapshot the "
            "source table (cdc_snapshot DAG) to bring their changes into the lake.",
            highlight=False,
        )
    if request.action is ReleaseAction.RECREATE:
        console.print(
            "the current table will be renamed to <table>__cdc_replaced_<batch id>; re-snapshot the source table "
            "(cdc_snapshot DAG) to bring back rows that had no change since, then drop the renamed table.",
            highlight=False,
        )


app.command("release")(release)
