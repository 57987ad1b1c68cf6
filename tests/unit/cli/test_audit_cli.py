"""`cdclake audit` on a ledger written through pyiceberg (no Spark)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger_rows import append_batches, summary
from pyiceberg.catalog import load_catalog
from typer.testing import CliRunner

from cdclake.cli.main import app
from cdclake.ingest.ledger import table_count_rows
from cdclake.lake import LakeConfig

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _summary(source: str, batch_id: str, applied: int) -> dict[str, Any]:
    return summary(
        source,
        batch_id,
        applied,
        tables={f"lake.{source}.inventory.orders": {"applied": applied, "skipped": 1, "dead_lettered": 1}},
        checks={"ok": False, "problems": ["a problem"] if batch_id == "p2" else []},
    )


def _batches(lake: Path) -> None:
    """A planned and a committed row per batch, as BatchLedger writes them (pyiceberg, no Spark)."""
    catalog = load_catalog(**LakeConfig.embedded(lake).pyiceberg_properties())
    append_batches(
        catalog,
        [
            (source, batch_id, seq, at, _summary(source, batch_id, applied))
            for source, batch_id, seq, at, applied in (
                ("pg", "p1", 1, T0, 3),
                ("maria", "m1", 1, T0 + timedelta(seconds=10), 4),
                ("pg", "p2", 2, T0 + timedelta(seconds=20), 5),
            )
        ],
    )


def test_audit_before_the_first_batch(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["audit", "--lake", str(tmp_path)])
    assert result.exit_code == 0 and "no batches yet" in result.output


def test_audit_shows_the_last_batches_oldest_first(tmp_path: Path) -> None:
    _batches(tmp_path)
    runner = CliRunner()
    as_json = runner.invoke(app, ["audit", "-n", "2", "--json", "--tables", "--lake", str(tmp_path)])
    assert as_json.exit_code == 0, as_json.output
    first, second = json.loads(as_json.output)
    maria = _summary("maria", "m1", 4)
    # the batch's summary as written, when it was recorded and the ledger's typed per-table counts
    assert first == maria | {
        "recorded_at": str(T0 + timedelta(seconds=10)),
        "table_counts": table_count_rows(maria["tables"]),
    }
    assert second["batch_id"] == "p2"

    shown = runner.invoke(app, ["audit", "pg", "--lake", str(tmp_path)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in shown.output.splitlines() if "│ pg " in line]
    assert [row[1:3] for row in rows] == [["pg", "p1"], ["pg", "p2"]] and "m1" not in shown.output
    assert rows[1] == ["2026-11-24 12:00:20", "pg", "p2", "6", "5", "1", "1", "5/1/0/0", "a problem", "1.2"]
