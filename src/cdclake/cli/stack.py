"""``cdclake stack up | down | status | logs | env``: the Docker-free local stack (Airflow included)."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cdclake.stack import Stack, StackConfig
from cdclake.stack.manager import ALL_SERVICES

app = typer.Typer(
    help="Run the local stack (Kafka KRaft, Kafka Connect + Debezium, PostgreSQL, MariaDB, Airflow 3) without Docker."
)
console = Console()

StateDir = typer.Option(None, "--state-dir", help="State directory [env CDC_STACK_DIR; default .stack/]")
Profile = typer.Option(
    None,
    "--profile",
    help="`cluster` adds a Spark standalone master and workers, an Iceberg REST catalog and an S3 object store "
    "(s3proxy) [env CDC_STACK_PROFILE; default]",
)


def _stack(state_dir: Optional[Path], profile: Optional[str] = None, **ports: Optional[int]) -> Stack:  # noqa: UP045 - typer needs Optional
    config = StackConfig.from_env(state_dir).with_ports(**ports)
    if profile is not None:
        if profile not in ("default", "cluster"):
            raise typer.BadParameter(f"{profile!r} is not a profile; use default or cluster", param_hint="--profile")
        config = replace(config, stack_profile=profile)
    return Stack(config)


def _progress(service: str, message: str) -> None:
    console.print(f"[cyan]{service:>21}[/] {message}", highlight=False)


@app.command()
def up(
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
    profile: Optional[str] = Profile,  # noqa: UP045
    kafka_port: Optional[int] = typer.Option(None, help="Kafka broker port [env CDC_KAFKA_PORT; 9092]"),  # noqa: UP045
    kafka_controller_port: Optional[int] = typer.Option(  # noqa: UP045
        None, help="KRaft controller port [env CDC_KAFKA_CONTROLLER_PORT; 9093]"
    ),
    connect_port: Optional[int] = typer.Option(None, help="Kafka Connect REST port [env CDC_CONNECT_PORT; 8083]"),  # noqa: UP045
    postgres_port: Optional[int] = typer.Option(None, help="PostgreSQL port [env CDC_POSTGRES_PORT; 5433]"),  # noqa: UP045
    mariadb_port: Optional[int] = typer.Option(None, help="MariaDB port [env CDC_MARIADB_PORT; 3307]"),  # noqa: UP045
    airflow_port: Optional[int] = typer.Option(  # noqa: UP045
        None, help="Airflow UI and API port [env CDC_AIRFLOW_PORT; 8080]"
    ),
) -> None:
    """Start every service that is not running and wait until each answers (idempotent).

    Airflow's API server, scheduler, DAG processor and triggerer are services of their own; the stack's
    connections are stored in Airflow's metadata database (Admin -> Connections). Every DAG is created
    paused: `cdclake demo`, the UI or `airflow dags unpause` turns them on.

    With `--profile cluster` it also starts s3proxy, the Iceberg REST catalog, a Spark master and
    CDC_SPARK_WORKERS workers; `eval "$(cdclake stack env --profile cluster)"` then points cdclake at them.
    """
    stack = _stack(
        state_dir,
        profile,
        kafka_port=kafka_port,
        kafka_controller_port=kafka_controller_port,
        connect_port=connect_port,
        postgres_port=postgres_port,
        mariadb_port=mariadb_port,
        airflow_port=airflow_port,
    )
    t0 = time.monotonic()
    with console.status("starting the local stack…"):
        stack.up(progress=_progress)
    console.print(f"[green]stack up[/] in {time.monotonic() - t0:.1f}s (state: {stack.config.state_dir})")
    _print_status(stack)
    console.print(
        f"Airflow: {stack.config.airflow_url} (user admin; password: AIRFLOW_ADMIN_PASSWORD in "
        f"{stack.config.secrets_file})",
        highlight=False,
    )


@app.command()
def down(state_dir: Optional[Path] = StateDir) -> None:  # noqa: UP045
    """Stop what `stack up` started (pid files), and every process those started; leaves data in the state directory."""
    stack = _stack(state_dir)
    stopped = stack.down(progress=_progress)
    console.print(f"[green]stopped[/] {', '.join(stopped)}" if stopped else "nothing was running")


@app.command()
def status(
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
    profile: Optional[str] = Profile,  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Say which services run, whether they answer, their memory (RSS and PSS), where they listen and log.

    It lists the profile's services, and any other service of the stack that runs."""
    stack = _stack(state_dir, profile)
    if as_json:
        typer.echo(json.dumps([asdict(row) for row in stack.status()], indent=2))
        return
    _print_status(stack)


def _print_status(stack: Stack) -> None:
    table = Table("service", "state", "pid", "RSS", "PSS", "listens", "log")
    rss = pss = 0
    for row in stack.status():
        state = "[green]ready[/]" if row.ready else ("[yellow]running[/]" if row.running else "[dim]stopped[/]")
        if row.probe:  # running, not ready: what its probe saw
            state += f"\n{escape(row.probe)}"
        rss += row.rss_bytes
        pss += row.pss_bytes
        table.add_row(
            row.name,
            state,
            str(row.pid or "-"),
            f"{row.rss_bytes / 2**20:.0f} MiB",
            f"{row.pss_bytes / 2**20:.0f} MiB",
            row.where,
            row.log_file,
        )
    console.print(table)
    console.print(f"total RSS {rss / 2**30:.2f} GiB, PSS {pss / 2**30:.2f} GiB (shared pages counted once)")


@app.command()
def logs(
    service: str = typer.Argument(..., help=f"One of: {', '.join(ALL_SERVICES)}"),
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
) -> None:
    """Print the last lines of a service's log."""
    process = _stack(state_dir).service(service).process
    typer.echo(process.tail(lines))
    if follow:
        for line in process.follow():
            typer.echo(line, nl=False)


@app.command()
def packages(
    install: bool = typer.Option(
        False, "--install", help="Install what is missing (needs root) instead of only checking."
    ),
) -> None:
    """Check (or install) the Debian packages the stack runs (PostgreSQL, MariaDB, Java 17+) and the browser the
    UI tests drive (Chromium)."""
    from cdclake.stack.debian import ensure_installed

    ensure_installed(install=install)
    console.print("Debian packages for the local stack: present (postgresql, mariadb-server, java 17+, chromium)")


@app.command()
def env(
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
    profile: Optional[str] = Profile,  # noqa: UP045
    connections: bool = typer.Option(
        False,
        "--connections",
        help="Also the stack's connections as AIRFLOW_CONN_* (for an Airflow of your own, e.g. `airflow dags "
        "test` in a throw-away AIRFLOW_HOME). They hold the passwords of the signal and reader users.",
    ),
) -> None:
    """Print `export` lines that point the `airflow` command (and cdclake) at the stack's Airflow.

    Use: eval "$(cdclake stack env)"; then `airflow dags list`, `airflow connections list` and the other
    commands talk to the stack's metadata database. The connections themselves live there
    (Admin -> Connections), not in the environment.

    In the cluster profile it also prints the CDC_LAKE_* and CDC_SPARK_MASTER variables of its REST catalog, S3
    warehouse (with the object store's key pair) and Spark master.
    """
    from cdclake.stack.cluster import lake_environment

    stack = _stack(state_dir, profile)
    variables = stack.airflow.client_environment(connections=connections)
    if stack.config.cluster:
        variables.update(lake_environment(stack.config, stack.secrets))
    for key, value in variables.items():
        typer.echo(f"export {key}={shlex.quote(value)}")
