"""ManagedProcess: a started process is found by its pid file at once, and stopped; a crashed one is reported.

Real processes (a Python interpreter), no stack.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from cdclake.stack.process import ManagedProcess


def _process(tmp_path: Path) -> tuple[ManagedProcess, str]:
    marker = f"cdclake-test-{uuid.uuid4().hex}"
    return ManagedProcess("sleeper", tmp_path / "sleeper.pid", tmp_path / "sleeper.log", marker), marker


def test_a_started_process_is_running_at_once_and_stops(tmp_path: Path) -> None:
    # right after start() the pid file must be trusted: the start-up of the stack asks for the pid at once
    # (Popen can return while the child is still inside execve, with the parent's command line)
    for _ in range(20):
        proc, marker = _process(tmp_path)
        pid = proc.start([sys.executable, "-c", "import time; time.sleep(60)", marker])
        try:
            assert proc.pid() == pid and proc.running() and not proc.exited_early()
            assert proc.pid_file.read_text().strip() == str(pid)
        finally:
            assert proc.stop(timeout_s=10)
        assert not proc.running() and not proc.pid_file.exists()


def test_a_process_that_dies_during_start_up_is_reported(tmp_path: Path) -> None:
    proc, marker = _process(tmp_path)
    proc.start([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)", marker])
    deadline = time.monotonic() + 10
    exited = False
    while time.monotonic() < deadline and not exited:
        exited = proc.exited_early()  # once: it also drops the stale pid file
        time.sleep(0.05)
    assert exited and not proc.running() and not proc.pid_file.exists()
    assert "boom" in proc.tail(5)
