"""`cdclake ingest` and `jobs/ingest.py` with gaps in Kafka's logs: a gap exits 1 with one message naming the
topic, partition and missing offsets; `--accept-gap` reaches the runner (before Spark starts, a bad value is an
error) and the accepted gaps are reported. The batch runner is replaced (no Spark, no Kafka)."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from cdclake.cli import ingest as ingest_cli
from cdclake.cli.main import app, main
from cdclake.ingest import runner
from cdclake.ingest.offsets import AcceptedGap, GapAcceptance, GapKind, OffsetGap, plan_ranges
from cdclake.ingest.summary import BatchSummary

T = "pg.inventory.items"
JOB = Path(__file__).resolve().parents[3] / "jobs" / "ingest.py"
DELETED = f"{T}[0]: offsets 120..449 were deleted before they were ingested (log starts at 450)"
NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)


def _raise_gap(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
    plan_ranges({(T, 0): 120}, {(T, 0): 450}, {(T, 0): 900}, accept=kwargs.get("accept_gaps"), source=spec)
    raise AssertionError("the gap was accepted")


def _accepted(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
    accept: GapAcceptance = kwargs["accept_gaps"]
    planned = plan_ranges({(T, 0): 120}, {(T, 0): 450}, {(T, 0): 900}, accept=accept, source=spec)
    gaps = [AcceptedGap(g, accept.accepted_by, NOW).as_dict() for g in planned.gaps]
    return BatchSummary(source=spec, batch_id="b-2", status="committed", records=450, accepted_gaps=gaps)


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's Spark session replaced."""
    monkeypatch.setattr(ingest_cli, "_session", lambda lake: None)


def _text(output: str) -> str:
    return " ".join(output.split())


def test_a_gap_exits_1_with_one_message_naming_topic_partition_and_offsets(
    no_spark: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner, "ingest_from_kafka", _raise_gap)
    monkeypatch.setattr(sys, "argv", ["cdclake", "ingest", "--spec", "postgres"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 1
    err = _text(capsys.readouterr().err)
    assert err.startswith("error: OffsetGapError: source postgres: 1 topic-partition(s) cannot continue")
    assert DELETED in err
    assert f"`--accept-gap {T}:0`" in err
    assert "Traceback" not in err


def test_accept_gap_reaches_the_runner_and_the_accepted_gap_is_reported(
    no_spark: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def ingest(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
        seen.update(kwargs)
        return _accepted(spark, spec, **kwargs)

    monkeypatch.setattr(runner, "ingest_from_kafka", ingest)
    summary_json = tmp_path / "summary.json"
    args = ["ingest", "--spec", "postgres", "--accept-gap", f"{T}:0", "--accept-gap", "pg.inventory.orders"]
    result = CliRunner().invoke(app, [*args, "--accepted-by", "alice", "--summary-json", str(summary_json)])
    assert result.exit_code == 0, result.output
    assert seen["accept_gaps"] == GapAcceptance(frozenset({"pg.inventory.orders"}), frozenset({(T, 0)}), "alice")
    assert f"accepted gap (by alice): {DELETED}" in _text(result.output)
    [gap] = json.loads(summary_json.read_text())["accepted_gaps"]
    assert (gap["topic"], gap["partition"], gap["committed"], gap["resumed_at"], gap["accepted_by"]) == (
        T,
        0,
        120,
        450,
        "alice",
    )


def test_without_accept_gap_the_runner_is_given_no_acceptance(no_spark: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def ingest(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
        seen.update(kwargs)
        return BatchSummary(source=spec, batch_id="b-2", status="committed")

    monkeypatch.setattr(runner, "ingest_from_kafka", ingest)
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres"])
    assert result.exit_code == 0, result.output
    assert not seen["accept_gaps"] and "accepted gap" not in result.output


def test_a_bad_accept_gap_value_fails_before_spark_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def session(lake: Any) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(ingest_cli, "_session", session)
    monkeypatch.setattr(sys, "argv", ["cdclake", "ingest", "--spec", "postgres", "--accept-gap", f"{T}:first"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 1
    assert f"error: ConfigError: --accept-gap '{T}:first': expected TOPIC:PARTITION" in _text(capsys.readouterr().err)


def test_the_help_documents_the_detection_and_the_flag() -> None:
    result = CliRunner().invoke(app, ["ingest", "--help"])
    out = _text(result.output)
    assert "--accept-gap TOPIC[:PARTITION]" in out and "--accepted-by" in out
    assert "When Kafka no longer holds the offset a topic-partition continues from" in out
    assert "Accept the loss explicitly with --accept-gap TOPIC:PARTITION (or TOPIC) for that run only." in out


def _job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cdclake_job_ingest_gaps", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spark_job_passes_accept_gap_to_the_runner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job()
    seen: dict[str, Any] = {}

    def ingest(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
        seen.update(kwargs)
        return _accepted(spark, spec, **kwargs)

    monkeypatch.setattr(job, "build_spark_session", lambda *a, **k: SimpleNamespace(stop=lambda: None))
    monkeypatch.setattr(job, "lake_rows", SimpleNamespace(session_catalog=lambda spark: None))
    monkeypatch.setattr(job, "ingest_from_kafka", ingest)
    summary_json = tmp_path / "summary.json"
    argv = [
        "--spec",
        "postgres",
        "--accept-gap",
        f"{T}:0",
        "--accepted-by",
        "alice",
        "--summary-json",
        str(summary_json),
    ]
    assert job.main(argv) == 0
    assert seen["accept_gaps"] == GapAcceptance(frozenset(), frozenset({(T, 0)}), "alice")
    assert json.loads(summary_json.read_text())["accepted_gaps"][0]["detail"] == DELETED
    capsys.readouterr()


def test_the_spark_job_takes_comma_separated_and_blank_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the ingest DAG renders from a list Param: one comma-separated value, blank for an empty list
    job = _job()
    seen: list[GapAcceptance] = []

    def ingest(spark: Any, spec: str, **kwargs: Any) -> BatchSummary:
        seen.append(kwargs["accept_gaps"])
        return BatchSummary(source=spec, batch_id=None, status="no-new-records")

    monkeypatch.setattr(job, "build_spark_session", lambda *a, **k: SimpleNamespace(stop=lambda: None))
    monkeypatch.setattr(job, "lake_rows", SimpleNamespace(session_catalog=lambda spark: None))
    monkeypatch.setattr(job, "ingest_from_kafka", ingest)
    assert job.main(["--spec", "postgres", "--accept-gap", f"{T}:0,pg.inventory.orders", "--accepted-by", "bob"]) == 0
    assert job.main(["--spec", "postgres", "--accept-gap", "", "--accepted-by", ""]) == 0
    assert seen == [GapAcceptance(frozenset({"pg.inventory.orders"}), frozenset({(T, 0)}), "bob"), GapAcceptance()]


def test_the_spark_job_fails_on_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    from cdclake.exceptions import OffsetGapError

    job = _job()
    stopped: list[bool] = []
    monkeypatch.setattr(job, "build_spark_session", lambda *a, **k: SimpleNamespace(stop=lambda: stopped.append(True)))
    monkeypatch.setattr(job, "lake_rows", SimpleNamespace(session_catalog=lambda spark: None))
    monkeypatch.setattr(job, "ingest_from_kafka", _raise_gap)
    with pytest.raises(OffsetGapError) as info:
        job.main(["--spec", "postgres"])
    assert info.value.gaps == [OffsetGap(T, 0, GapKind.DELETED, 120, 450, 900)]
    assert stopped == [True]
