"""`cdclake ingest` and `cdclake replay` exit 65 when a batch dead-lettered records (unless
--allow-dead-letters), after reporting them per topic and reason; the batch runner is replaced by one that
returns a summary (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cdclake.cli import ingest as ingest_cli
from cdclake.cli.main import app
from cdclake.ingest import runner, sources
from cdclake.ingest.summary import BatchSummary, dead_letter_counts

ORDERS = "pg.inventory.orders"


def _batch(batch_id: str, *dead: tuple[str, int, str, int]) -> BatchSummary:
    return BatchSummary(source="postgres", batch_id=batch_id, status="committed", dead_letters=dead_letter_counts(dead))


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make `ingest` return the first of the given summaries and `replay` commit them all, in order."""
    monkeypatch.setattr(ingest_cli, "_session", lambda lake: None)
    monkeypatch.setattr(sources, "prepare_replay_files", lambda files: None, raising=False)

    def use(*summaries: BatchSummary) -> None:
        def ingest_from_kafka(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
            return summaries[0]

        def replay_files(spark: Any, files: Any, *, on_batch: Callable[[BatchSummary], None], **kwargs: Any) -> Any:
            for s in summaries:
                on_batch(s)
            return summaries[-1]

        monkeypatch.setattr(runner, "ingest_from_kafka", ingest_from_kafka)
        monkeypatch.setattr(runner, "replay_files", replay_files)

    return use


def _text(output: str) -> str:
    """``output`` with rich's line wrapping undone."""
    return " ".join(output.split())


def test_ingest_exits_65_and_lists_the_dead_letters_per_topic_and_reason(batches: Callable[..., None]) -> None:
    batches(_batch("b-1", (ORDERS, 0, "no_schema", 5), (ORDERS, 1, "invalid_json", 1)))
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres"])
    assert result.exit_code == ingest_cli.EXIT_DEAD_LETTERS == 65, result.output
    out = _text(result.output)
    assert f"batch b-1: {ORDERS}: 1 record(s), reason invalid_json" in out
    assert f"batch b-1: {ORDERS}: 5 record(s), reason no_schema" in out
    assert "6 record(s) of batch(es) b-1 could not be decoded; the batch(es) committed without them" in out
    assert "`cdclake lake show lake.cdc_audit.dead_letters`" in out and "`cdclake audit postgres`" in out
    assert "/cdclake/sources/postgres/dead-letters" in out
    assert out.endswith("exit status 65 (--allow-dead-letters exits 0)")


def test_allow_dead_letters_exits_0_and_still_reports_them(batches: Callable[..., None]) -> None:
    batches(_batch("b-1", (ORDERS, 0, "no_schema", 5)))
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres", "--allow-dead-letters"])
    assert result.exit_code == 0, result.output
    assert f"batch b-1: {ORDERS}: 5 record(s), reason no_schema" in _text(result.output)
    assert "exit status" not in result.output


def test_ingest_without_dead_letters_exits_0(batches: Callable[..., None], tmp_path: Path) -> None:
    batches(_batch("b-1"))
    summary_json = tmp_path / "summary.json"
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres", "--summary-json", str(summary_json)])
    assert result.exit_code == 0, result.output
    assert "dead letters" not in result.output
    assert json.loads(summary_json.read_text())["dead_letters"] == {}


def test_replay_runs_every_batch_then_exits_65_with_the_json_on_stdout(batches: Callable[..., None]) -> None:
    batches(_batch("b-1"), _batch("b-2", (ORDERS, 0, "no_schema", 2)), _batch("b-3"))
    result = CliRunner().invoke(app, ["replay", "recorded.jsonl", "--json"])
    assert result.exit_code == 65, result.output
    assert [(b["batch_id"], b["dead_letters"]) for b in json.loads(result.stdout)] == [
        ("b-1", {}),
        ("b-2", {ORDERS: {"no_schema": 2}}),
        ("b-3", {}),
    ]
    assert f"batch b-2: {ORDERS}: 2 record(s), reason no_schema" in _text(result.stderr)
    assert CliRunner().invoke(app, ["replay", "recorded.jsonl", "--allow-dead-letters"]).exit_code == 0


def test_the_help_documents_the_status_and_the_flag() -> None:
    for command in ("ingest", "replay"):
        result = CliRunner().invoke(app, [command, "--help"])
        assert "--allow-dead-letters" in result.output and "status 65" in _text(result.output), result.output
