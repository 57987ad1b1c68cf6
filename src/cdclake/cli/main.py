"""``cdclake``: command-line entry point. Subcommands live in one module each and register here."""

from __future__ import annotations

import inspect
import logging

import typer
from rich.console import Console

from cdclake import __version__
from cdclake.cli import lake as lake_cli
from cdclake.cli import quarantine as quarantine_cli
from cdclake.cli import spark as spark_cli
from cdclake.cli import stack as stack_cli
from cdclake.cli.audit import audit
from cdclake.cli.capture import capture
from cdclake.cli.demo import demo
from cdclake.cli.ingest import ingest, replay
from cdclake.cli.reconcile import reconcile
from cdclake.exceptions import CdcError, SourceBusyError
from cdclake.settings import settings

app = typer.Typer(
    name="cdclake",
    help="Change-data-capture lakehouse: Debezium on Kafka Connect into Apache Iceberg, run from Apache Airflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(stack_cli.app, name="stack")
app.command(name="demo")(demo)
app.command(name="capture")(capture)
app.command(name="ingest")(ingest)
app.command(name="replay")(replay)
app.command(name="reconcile")(reconcile)
app.add_typer(lake_cli.app, name="lake")
app.add_typer(quarantine_cli.app, name="quarantine")
app.command(name="audit")(audit)
app.add_typer(spark_cli.app, name="spark")
err = Console(stderr=True)


def flow(doc: str) -> str:
    """A command's docstring as ``--help`` text: the lines of each paragraph joined, so that the terminal wraps
    them (Typer keeps a docstring's line breaks, which leaves ragged lines in a terminal narrower than the source);
    a paragraph with an indented, listed (``- ``, ``* ``) or ``\\b``-marked line keeps its breaks, and what follows a
    ``\\f`` line is kept as is (pure)."""
    head, mark, tail = inspect.cleandoc(doc).partition("\n\f")
    paragraphs = []
    for paragraph in head.split("\n\n"):
        lines = paragraph.splitlines()
        kept = paragraph.startswith("\b") or any(line.startswith((" ", "- ", "* ", "\b")) for line in lines[1:])
        paragraphs.append(paragraph if kept else " ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs) + mark + tail


def _flow_commands(typer_app: typer.Typer) -> None:
    """Set every command's help (that has none of its own) to its callback's docstring, flowed (:func:`flow`)."""
    for command in typer_app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            command.help = flow(command.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _flow_commands(group.typer_instance)


_flow_commands(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cdclake {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug details to stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else getattr(logging, settings().log_level),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )


#: Exit status when another run holds the source's lock (EX_TEMPFAIL: try again later).
EXIT_SOURCE_BUSY = 75


def main() -> None:
    """Run the CLI; cdclake errors print as one clear message and exit 1 (75 when the source is busy).

    ``ingest`` and ``replay`` exit :data:`cdclake.cli.ingest.EXIT_DEAD_LETTERS` (65, EX_DATAERR) when a batch
    committed with dead-lettered records, unless given ``--allow-dead-letters``.
    """
    try:
        app()
    except SourceBusyError as exc:
        err.print(f"[bold yellow]busy:[/] {exc}", highlight=False)
        raise SystemExit(EXIT_SOURCE_BUSY) from None
    except CdcError as exc:
        err.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
