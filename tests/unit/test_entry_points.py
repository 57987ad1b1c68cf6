"""The spark-submit entry points in ``jobs/`` import (what they use of cdclake exists) and parse their options."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cdclake_job_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted(JOBS.glob("*.py")), ids=lambda p: p.name)
def test_job_entry_point_imports_and_shows_its_help(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = _load(path)
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "--summary-json" in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--run-for", "60"], ["--max-batches", "2"], ["--keep-snapshots", "5"],
                                    ["--compact-every", "3"]])  # fmt: skip
def test_the_ingest_job_refuses_follow_options_without_follow(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    module = _load(JOBS / "ingest.py")
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(["--spec", "postgres", *option])
    assert exit_info.value.code == 2
    assert f"{option[0]} go(es) with --follow" in capsys.readouterr().err


def test_the_ingest_jobs_follow_options_default_to_the_followers() -> None:
    from cdclake.ingest.follow import COMPACT_EVERY_DEFAULT, KEEP_SNAPSHOTS_DEFAULT

    module = _load(JOBS / "ingest.py")
    options = module.follow_options(module.parse_args(["--spec", "postgres", "--follow"]), 60.0)
    assert (options.keep_snapshots, options.compact_every) == (KEEP_SNAPSHOTS_DEFAULT, COMPACT_EVERY_DEFAULT)
    argv = ["--spec", "postgres", "--follow", "--keep-snapshots", "0", "--compact-every", "3"]
    options = module.follow_options(module.parse_args(argv), 60.0)
    assert (options.keep_snapshots, options.compact_every, options.lock_wait_s) == (None, 3, 60.0)


def test_the_ingest_job_refuses_a_negative_upkeep_option(capsys: pytest.CaptureFixture[str]) -> None:
    module = _load(JOBS / "ingest.py")
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args(["--spec", "postgres", "--follow", "--compact-every", "-1"])
    assert exit_info.value.code == 2
    assert "--compact-every must be 0 or more" in capsys.readouterr().err
