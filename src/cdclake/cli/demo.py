"""``cdclake demo``: the pipeline end to end through the stack's Airflow (:mod:`cdclake.demo.pipeline`)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from cdclake.demo.pipeline import DemoReport, Reporter, run_demo
from cdclake.stack import Stack, StackConfig

console = Console()


class _ConsoleReporter(Reporter):
    """Each step as a line, its progress below it, then what it did and how long it took."""

    def start(self, title: str) -> None:
        console.print(f"[bold cyan]▸[/] {title}", highlight=False)

    def status(self, text: str) -> None:
        console.print(f"  [dim]· {text}[/]", highlight=False)

    def done(self, text: str, seconds: float) -> None:
        console.print(f"  [green]✓[/] {text} [dim]({seconds:.1f}s)[/]", highlight=False)


def demo(
    rows: int = typer.Option(40, "--rows", min=5, help="Customers and orders the workload creates per database."),
    duration: float = typer.Option(60.0, "--duration", min=0, help="Seconds the workload's steps are spread over."),
    timeout: float = typer.Option(900.0, "--timeout", help="Seconds to wait for each DAG run and for the lake."),
) -> None:
    """Run the pipeline end to end through Airflow; exit 1 when a table of the lake differs from its source.

    Starts the local stack with Airflow, creates the shop schema, registers the connectors by triggering the
    cdc_connectors DAG, turns the scheduled ingest DAGs on, runs a workload on PostgreSQL and MariaDB while they
    run (with a cdc_snapshot along the way), waits until the lake has caught up, reconciles through the
    cdc_reconcile DAG and prints, per table, source rows vs lake rows and the verdict. The stack and Airflow keep
    running afterwards.
    """
    report = run_demo(
        Stack(StackConfig.from_env()), rows=rows, duration_s=duration, timeout_s=timeout, reporter=_ConsoleReporter()
    )
    _print_report(report)
    raise typer.Exit(0 if report.equal else 1)


def _print_report(report: DemoReport) -> None:
    table = Table("source", "table", "source rows", "lake rows", "verdict", "differing keys (sample)")
    for v in report.verdicts:
        style = {"equal": "green", "different": "bold red"}.get(v.status, "dim")
        table.add_row(
            v.source,
            v.table,
            str(v.source_rows),
            str(v.lake_rows),
            f"[{style}]{v.status}[/]",
            v.sample_keys or (v.note or ""),
        )
    console.print(table)
    p50, worst = report.freshness_p50, report.freshness_max
    console.print(
        "batches committed: "
        + ", ".join(
            f"{s} {n} ({report.scheduled_runs.get(s, 0)} scheduled ingest runs)" for s, n in report.batches.items()
        ),
        highlight=False,
    )
    if p50 is not None and worst is not None:
        console.print(
            "freshness, source commit to visible in the lake: "
            f"p50 {p50:.1f}s, max {worst:.1f}s over {len(report.freshness_s)} rows",
            highlight=False,
        )
    if report.snapshot_runs:
        console.print(
            "cdc_snapshot runs: " + ", ".join(f"{s} {state}" for s, state in report.snapshot_runs.items()),
            highlight=False,
        )
    verdict = (
        "[green]every table of the lake equals its source[/]"
        if report.equal
        else "[bold red]differences: "
        + "; ".join(f"{v.source} {v.table} keys {v.sample_keys}" for v in report.different)
        + "[/]"
    )
    # a REST lake is the cluster profile's: the commands find it through the variables `stack env` prints
    lake_env = ' (after `eval "$(cdclake stack env --profile cluster)"`)' if "://" in report.lake else ""
    console.print(
        f"\n{verdict} — done in {report.seconds:.0f}s.\n"
        f"Airflow UI: {report.airflow_url} (user admin, password: AIRFLOW_ADMIN_PASSWORD in {report.secrets_file})\n"
        f"CDC view:   {report.airflow_url}/plugin/cdc  (Browse → CDC), and the 'CDC source' tab of each ingest DAG\n"
        f"The lake:   {report.lake}; `cdclake lake tables`, `cdclake audit`, `cdclake reconcile postgres`{lake_env}\n"
        "The stack and Airflow keep running (the ingest DAGs run on schedule); stop everything with "
        "`cdclake stack down`.",
        highlight=False,
    )
