"""`cdclake replay` reports every batch of a multi-batch replay (text and JSON)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from cdclake.cli import ingest as ingest_cli
from cdclake.cli.main import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))

from events import PgTable  # noqa: E402

pytestmark = pytest.mark.spark


def test_replay_reports_each_batch(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the session fixture's lake stands in for --lake (one SparkSession per test run)
    monkeypatch.setattr(ingest_cli, "_session", lambda lake: spark)
    prefix = f"rcli{uuid.uuid4().hex[:6]}"
    items = PgTable(prefix=prefix, table="items")
    for i in range(5):
        items.create({"id": i, "name": f"n{i}", "qty": i}, lsn=100 + 10 * i)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items.take()))

    result = CliRunner().invoke(app, ["replay", str(path), "--max-records", "2", "--json"])
    assert result.exit_code == 0, result.output
    batches = json.loads(result.stdout)
    assert [b["records"] for b in batches] == [2, 2, 1]
    assert len({b["batch_id"] for b in batches}) == 3 and all(b["status"] == "committed" for b in batches)
    assert sum(b["tables"][f"lake.{prefix}.inventory.items"]["applied"] for b in batches) == 5

    again = CliRunner().invoke(app, ["replay", str(path), "--max-records", "2"])
    assert again.exit_code == 0 and "nothing new to apply" in again.output
