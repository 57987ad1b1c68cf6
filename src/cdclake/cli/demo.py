"""``cdclake demo``: bring the local stack up and check that it is healthy.

The end-to-end demo pipeline (register connectors, write a workload, ingest into the lake, reconcile)
is added to this command as those capabilities land; today it stops once the stack is up and healthy.
"""

from __future__ import annotations

import typer
from rich.console import Console

from cdclake.cli.stack import _print_status, _progress
from cdclake.exceptions import StackError
from cdclake.stack import Stack, StackConfig

console = Console()


def demo() -> None:
    """Start the local stack (if needed) and check every service answers."""
    stack = Stack(StackConfig.from_env())
    with console.status("starting the local stack…"):
        stack.up(progress=_progress)
    rows = stack.status()
    _print_status(stack)
    if not all(row.ready for row in rows):
        raise StackError("some services do not answer; see `cdclake stack status` and `cdclake stack logs SERVICE`")
    console.print(
        '[green]local stack is up and healthy.[/] Next: `eval "$(cdclake stack env)"` to point Airflow at it; '
        "`cdclake stack down` to stop it."
    )
    raise typer.Exit(0)
