"""``cdclake stack up | down | status | logs | env``: the Docker-free local stack."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from cdclake.stack import Stack, StackConfig
from cdclake.stack.config import DEMO_DATABASE, password
from cdclake.stack.manager import SERVICE_ORDER

app = typer.Typer(
    help="Run the local stack (Kafka KRaft, Kafka Connect + Debezium, PostgreSQL, MariaDB) without Docker."
)
console = Console()

StateDir = typer.Option(None, "--state-dir", help="State directory [env CDC_STACK_DIR; default .stack/]")


def _stack(state_dir: Optional[Path], **ports: Optional[int]) -> Stack:  # noqa: UP045 - typer needs Optional
    return Stack(StackConfig.from_env(state_dir).with_ports(**ports))


def _progress(service: str, message: str) -> None:
    console.print(f"[cyan]{service:>9}[/] {message}", highlight=False)


@app.command()
def up(
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
    kafka_port: Optional[int] = typer.Option(None, help="Kafka broker port [env CDC_KAFKA_PORT; 9092]"),  # noqa: UP045
    kafka_controller_port: Optional[int] = typer.Option(  # noqa: UP045
        None, help="KRaft controller port [env CDC_KAFKA_CONTROLLER_PORT; 9093]"
    ),
    connect_port: Optional[int] = typer.Option(None, help="Kafka Connect REST port [env CDC_CONNECT_PORT; 8083]"),  # noqa: UP045
    postgres_port: Optional[int] = typer.Option(None, help="PostgreSQL port [env CDC_POSTGRES_PORT; 5433]"),  # noqa: UP045
    mariadb_port: Optional[int] = typer.Option(None, help="MariaDB port [env CDC_MARIADB_PORT; 3307]"),  # noqa: UP045
) -> None:
    """Start every service that is not running and wait until each answers (idempotent)."""
    stack = _stack(
        state_dir,
        kafka_port=kafka_port,
        kafka_controller_port=kafka_controller_port,
        connect_port=connect_port,
        postgres_port=postgres_port,
        mariadb_port=mariadb_port,
    )
    t0 = time.monotonic()
    with console.status("starting the local stack…"):
        stack.up(progress=_progress)
    console.print(f"[green]stack up[/] in {time.monotonic() - t0:.1f}s (state: {stack.config.state_dir})")
    _print_status(stack)


@app.command()
def down(state_dir: Optional[Path] = StateDir) -> None:  # noqa: UP045
    """Stop what `stack up` started (pid files); leaves data in the state directory."""
    stack = _stack(state_dir)
    stopped = stack.down(progress=_progress)
    console.print(f"[green]stopped[/] {', '.join(stopped)}" if stopped else "nothing was running")


@app.command()
def status(
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Say which services run, whether they answer, their memory, where they listen and log."""
    stack = _stack(state_dir)
    if as_json:
        typer.echo(json.dumps([asdict(row) for row in stack.status()], indent=2))
        return
    _print_status(stack)


def _print_status(stack: Stack) -> None:
    table = Table("service", "state", "pid", "RSS", "listens", "log")
    total = 0
    for row in stack.status():
        state = "[green]ready[/]" if row.ready else ("[yellow]running[/]" if row.running else "[dim]stopped[/]")
        total += row.rss_bytes
        table.add_row(row.name, state, str(row.pid or "-"), f"{row.rss_bytes / 2**20:.0f} MiB", row.where, row.log_file)
    console.print(table)
    console.print(f"total RSS {total / 2**30:.2f} GiB")


@app.command()
def logs(
    service: str = typer.Argument(..., help=f"One of: {', '.join(SERVICE_ORDER)}"),
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    state_dir: Optional[Path] = StateDir,  # noqa: UP045
) -> None:
    """Print the last lines of a service's log."""
    svc = _stack(state_dir).service(service)
    typer.echo(svc.process.tail(lines))
    if follow:
        with open(svc.log_file, encoding="utf-8", errors="replace") as fh:
            fh.seek(0, 2)
            while True:
                line = fh.readline()
                if line:
                    typer.echo(line, nl=False)
                else:
                    time.sleep(0.5)


@app.command()
def packages(
    install: bool = typer.Option(
        False, "--install", help="Install what is missing (needs root) instead of only checking."
    ),
) -> None:
    """Check (or install) the Debian packages the stack runs: PostgreSQL, MariaDB, Java 17+."""
    from cdclake.stack.debian import ensure_installed

    ensure_installed(install=install)
    console.print("Debian packages for the local stack: present (postgresql, mariadb-server, java 17+)")


@app.command()
def env(state_dir: Optional[Path] = StateDir) -> None:  # noqa: UP045
    """Print `export` lines with the Airflow connections (AIRFLOW_CONN_*) for the local stack.

    Use: eval "$(cdclake stack env)". The database connections are the signal-writer users.
    """
    for key, value in stack_environment(_stack(state_dir)).items():
        typer.echo(f"export {key}={shlex.quote(value)}")


def stack_environment(stack: Stack) -> dict[str, str]:
    """Environment variables that point Airflow and cdclake at the local stack."""
    c = stack.config
    secrets = stack.secrets
    conns = {
        "KAFKA_CONNECT_DEFAULT": {
            "conn_type": "kafka_connect",
            "host": c.host,
            "port": c.connect_port,
            "schema": "http",
        },
        "KAFKA_DEFAULT": {
            "conn_type": "kafka",
            "extra": {"bootstrap.servers": c.kafka_bootstrap, "group.id": "cdclake-airflow"},
        },
        "SPARK_DEFAULT": {"conn_type": "spark", "host": "local[*]", "extra": {"deploy-mode": "client"}},
        "CDC_POSTGRES": {
            "conn_type": "postgres",
            "host": c.host,
            "port": c.postgres_port,
            "login": "cdc_signal",
            "password": password(secrets, "postgres", "signal"),
            "schema": DEMO_DATABASE,
        },
        "CDC_MARIADB": {
            "conn_type": "mysql",
            "host": c.host,
            "port": c.mariadb_port,
            "login": "cdc_signal",
            "password": password(secrets, "mariadb", "signal"),
            "schema": DEMO_DATABASE,
        },
    }
    out = {f"AIRFLOW_CONN_{name}": json.dumps(conn) for name, conn in conns.items()}
    out["CDC_STACK_DIR"] = str(c.state_dir)
    return out
