"""``cdclake capture``: record Kafka topics into JSON Lines fixtures (the replay format)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from cdclake.capture import capture_to_file, prefix_patterns
from cdclake.exceptions import ConfigError
from cdclake.stack import StackConfig

console = Console()


def capture(
    out: Path = typer.Option(..., "--out", "-o", help="JSON Lines file to write."),
    prefix: Optional[list[str]] = typer.Option(  # noqa: UP045
        None, "--prefix", "-p", help="Debezium topic.prefix: records all of that connector's topics (repeatable)."
    ),
    topic: Optional[list[str]] = typer.Option(None, "--topic", "-t", help="Topic name regex (repeatable)."),  # noqa: UP045
    bootstrap: Optional[str] = typer.Option(  # noqa: UP045
        None, help="Kafka bootstrap servers [default: the local stack's broker]"
    ),
    timeout: float = typer.Option(60.0, help="Seconds allowed to read each partition to its end."),
) -> None:
    """Record topics from their beginning to their current end, one record per line, exact strings."""
    patterns = [p for pre in (prefix or []) for p in prefix_patterns(pre)] + list(topic or [])
    if not patterns:
        raise ConfigError("give at least one --prefix or --topic")
    bootstrap = bootstrap or StackConfig.from_env().kafka_bootstrap
    with Progress(TextColumn("recording"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
        task = bar.add_task("records", total=None)
        ranges = capture_to_file(bootstrap, patterns, out, timeout_s=timeout, on_record=lambda n: bar.advance(task, n))
    for rng in ranges:
        console.print(f"{rng.topic}/{rng.partition}: offsets {rng.start}..{rng.end - 1} ({rng.count})", highlight=False)
    console.print(f"[green]{sum(r.count for r in ranges)} records[/] from {len(ranges)} partitions -> {out}")
