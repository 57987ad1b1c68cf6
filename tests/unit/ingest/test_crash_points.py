"""The crash points of the exactly-once tests (``CDC_FAULT_AT``), and ``CDC_FAULT_ONCE``, which lets a retry
get past one. Each attempt is a process of its own, as the crash ends the process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = "from cdclake.ingest.faults import crash_point; crash_point('table:1'); crash_point('planned'); print('ran')"


def _attempt(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CDC_FAULT")}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_every_attempt_crashes_at_the_named_point_without_a_marker() -> None:
    for _ in range(2):
        proc = _attempt(CDC_FAULT_AT="planned")
        assert proc.returncode == 137 and proc.stdout == ""
        assert "injected crash at planned" in proc.stderr


def test_with_a_marker_only_the_first_attempt_crashes(tmp_path: Path) -> None:
    marker = tmp_path / "faults" / "ingest.crashed"
    first = _attempt(CDC_FAULT_AT="planned", CDC_FAULT_ONCE=str(marker))
    assert first.returncode == 137 and "injected crash at planned" in first.stderr
    assert marker.read_text() == "planned\n"
    retry = _attempt(CDC_FAULT_AT="planned", CDC_FAULT_ONCE=str(marker))
    assert retry.returncode == 0 and retry.stdout == "ran\n", retry.stderr


def test_other_points_and_an_unset_fault_do_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    assert _attempt(CDC_FAULT_AT="after-commit", CDC_FAULT_ONCE=str(marker)).stdout == "ran\n"
    assert not marker.exists()
    assert _attempt().stdout == "ran\n"
