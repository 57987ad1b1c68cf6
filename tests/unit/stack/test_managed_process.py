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
            assert proc.pid_file.read_text().split()[0] == str(pid)
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


_TREE = """
import os, subprocess, sys, time
marker, out = sys.argv[1], sys.argv[2]
# a child in a process group of its own (like Airflow's task processes), with a child of its own
# (like the spark-submit a task runs); both ignore nothing and would outlive a signal to our group
child = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time; os.setsid(); "
                          "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
                          "print(p.pid, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
grandchild = child.stdout.readline().strip()
with open(out, "w") as fh:
    fh.write(f"{child.pid} {grandchild}")
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_stop_ends_descendants_in_process_groups_of_their_own(tmp_path: Path) -> None:
    proc, marker = _process(tmp_path)
    out = tmp_path / "pids"
    proc.start([sys.executable, "-c", _TREE, marker, str(out)])
    deadline = time.monotonic() + 20
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child, grandchild = (int(p) for p in out.read_text().split())
    assert _alive(child) and _alive(grandchild)
    assert proc.pss_bytes() > 0
    assert proc.stop(timeout_s=10)
    assert not _alive(child) and not _alive(grandchild)


def test_stop_finds_orphans_by_their_tag(tmp_path: Path) -> None:
    # the main process exits, leaving a detached child (re-parented to init): the tag still names it ours
    proc, marker = _process(tmp_path)
    out = tmp_path / "orphan"
    script = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
        "start_new_session=True); open(sys.argv[2], 'w').write(str(p.pid))"
    )
    proc.start([sys.executable, "-c", script, marker, str(out)])
    deadline = time.monotonic() + 20
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphan = int(out.read_text())
    deadline = time.monotonic() + 20
    while proc.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(orphan)
    assert not proc.stop(timeout_s=5)  # the main process is gone, its orphan is stopped all the same
    assert not _alive(orphan)


def test_follow_yields_the_lines_written_after_it_started(tmp_path: Path) -> None:
    proc, _ = _process(tmp_path)
    proc.log_file.write_text("before\n")
    lines = proc.follow(poll_s=0.01)
    with open(proc.log_file, "a") as fh:
        fh.write("first\n")
        fh.flush()
        assert next(lines) == "first\n"  # opened at the end: "before" is not shown again
        fh.write("second\n")
    assert next(lines) == "second\n"
    lines.close()
