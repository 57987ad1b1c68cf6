"""``cdclake spark cds``: the Spark driver's class-data sharing archive (a faster start for every job)."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(help="The Spark driver JVM on this machine.")
console = Console(stderr=True)


@app.command()
def cds(
    rebuild: bool = typer.Option(False, "--rebuild", help="Write the archive again even if it is up to date."),
) -> None:
    """Write the class-data sharing archive the driver JVM maps at start (skipped when up to date)."""
    from cdclake import cds as archive

    if not archive.enabled():
        console.print(f"class-data sharing is off (${archive.CDS_ENV}); nothing to do", highlight=False)
        return
    with console.status("writing the class-data sharing archive (two short Spark runs)"):
        result = archive.build_archive(rebuild=rebuild)
    state = f"written in {result.seconds:.0f}s" if result.built else "up to date"
    console.print(f"class-data sharing archive {result.path} ({result.size / 2**20:.0f} MiB): {state}", highlight=False)
