"""``cdclake ingest``'s follow options reach the follower as given (no Spark: the session and the follower are
replaced), and the follow-only ones are refused without ``--follow``."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from cdclake.cli import ingest as ingest_cli
from cdclake.cli.main import app
from cdclake.ingest.follow import COMPACT_EVERY_DEFAULT, KEEP_SNAPSHOTS_DEFAULT, MAX_RECORDS_DEFAULT, FollowOptions


@pytest.fixture
def followed(monkeypatch: pytest.MonkeyPatch) -> list[FollowOptions]:
    seen: list[FollowOptions] = []
    monkeypatch.setattr(ingest_cli, "_session", lambda lake: object())
    monkeypatch.setattr(
        ingest_cli, "_follow", lambda spark, spec, bootstrap, schema, options, *rest: seen.append(options)
    )
    return seen


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        ([], "keep_snapshots", KEEP_SNAPSHOTS_DEFAULT),
        (["--keep-snapshots", "50"], "keep_snapshots", 50),
        (["--keep-snapshots", "0"], "keep_snapshots", None),
        ([], "compact_every", COMPACT_EVERY_DEFAULT),
        (["--compact-every", "3"], "compact_every", 3),
        (["--compact-every", "0"], "compact_every", None),
        ([], "max_records", MAX_RECORDS_DEFAULT),
        (["--max-records", "5000"], "max_records", 5000),
        (["--max-records", "0"], "max_records", None),
    ],
)
def test_the_follow_options_reach_the_follower(
    followed: list[FollowOptions], args: list[str], option: str, value: Any
) -> None:
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres", "--follow", *args])
    assert result.exit_code == 0, result.output
    assert [getattr(o, option) for o in followed] == [value]


@pytest.mark.parametrize(
    "args", [["--keep-snapshots", "5"], ["--compact-every", "5"], ["--run-for", "60"], ["--max-batches", "2"]]
)
def test_follow_options_without_follow_are_refused(followed: list[FollowOptions], args: list[str]) -> None:
    result = CliRunner().invoke(app, ["ingest", "--spec", "postgres", *args])
    assert result.exit_code == 2 and "go with --follow" in " ".join(result.output.replace("│", " ").split()), (
        result.output
    )
    assert not followed
