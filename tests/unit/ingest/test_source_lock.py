"""The source lock (cdc_audit.locks) on a real embedded lake (pyiceberg, SQLite catalog), from real processes.

Several processes race for one source's lock: their holding intervals never overlap. A holder that dies is
replaced at once on the same host; a holder on another host blocks until its lease runs out.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cdclake.exceptions import SourceBusyError
from cdclake.ingest.lock import ACQUIRED, RELEASED, RENEWED, Owner, SourceLock, current_holder, source_lock
from cdclake.lake import LakeConfig
from cdclake.lake import rows as lake_rows
from cdclake.lake.rows import ensure_namespace

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _catalog(root: Path):  # type: ignore[no-untyped-def]
    lake = LakeConfig.embedded(root)
    lake.ensure_dirs()
    return lake.open_catalog()


def _row(lock_id: str, event: str, at_s: float, owner: Owner, lease_s: float = 60) -> dict[str, object]:
    at = T0 + timedelta(seconds=at_s)
    return {
        "source": "pg",
        "lock_id": lock_id,
        "event": event,
        "owner": owner.to_json(),
        "at": at,
        "expires_at": at + timedelta(seconds=lease_s),
    }


HERE = Owner("here", "boot", 1, 100)
THERE = Owner("there", "boot", 2, 200)


@pytest.mark.parametrize(
    ("rows", "now_s", "alive", "holder"),
    [
        ([], 0, {}, None),
        ([_row("a", ACQUIRED, 0, HERE)], 1, {1: True}, "a"),
        ([_row("a", ACQUIRED, 0, HERE), _row("a", RELEASED, 5, HERE)], 6, {1: True}, None),
        # a dead holder on this host holds nothing, whatever its lease says
        ([_row("a", ACQUIRED, 0, HERE)], 1, {1: False}, None),
        # another host's holder: held while its lease runs, renewals extend it
        ([_row("b", ACQUIRED, 0, THERE)], 30, {}, "b"),
        ([_row("b", ACQUIRED, 0, THERE)], 61, {}, None),
        ([_row("b", ACQUIRED, 0, THERE), _row("b", RENEWED, 40, THERE)], 61, {}, "b"),
        # a release is final even if a late renewal row follows it
        ([_row("b", ACQUIRED, 0, THERE), _row("b", RELEASED, 10, THERE), _row("b", RENEWED, 11, THERE)], 12, {}, None),
    ],
    ids=[
        "free",
        "held",
        "released",
        "dead-holder",
        "remote-lease",
        "remote-expired",
        "remote-renewed",
        "final-release",
    ],
)
def test_current_holder(
    rows: list[dict[str, object]], now_s: float, alive: dict[int, bool], holder: str | None
) -> None:
    def is_alive(owner: Owner) -> bool | None:
        return alive.get(owner.pid) if owner.host == "here" else None

    found = current_holder(rows, T0 + timedelta(seconds=now_s), is_alive)
    assert (found.lock_id if found else None) == holder


def _contender(root: str, out: str, hold_s: float) -> None:
    try:
        catalog = _catalog(Path(root))
        with source_lock(catalog, "pg", wait_s=120, label=f"contender {os.getpid()}"):
            start = time.time()
            time.sleep(hold_s)
            end = time.time()
    except BaseException:
        with open(f"{out}.{os.getpid()}.err", "w") as fh:
            fh.write(traceback.format_exc())
        raise
    with open(out, "a") as fh:
        fh.write(json.dumps([start, end]) + "\n")


def test_racing_processes_hold_the_lock_one_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "intervals.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_contender, args=(str(tmp_path / "lake"), str(out), 0.5)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    errors = [f.read_text() for f in sorted(tmp_path.glob("intervals.jsonl.*.err"))]
    assert [p.exitcode for p in procs] == [0, 0, 0], "\n".join(errors)
    intervals = sorted(json.loads(line) for line in out.read_text().splitlines())
    assert len(intervals) == 3
    for (_, end), (start, _) in zip(intervals, intervals[1:], strict=False):
        assert start >= end, f"two holders at once: {intervals}"
    rows = _catalog(tmp_path / "lake").load_table(("cdc_audit", "locks")).scan().to_arrow().to_pylist()
    assert sorted(r["event"] for r in rows if r["event"] != RENEWED) == [ACQUIRED] * 3 + [RELEASED] * 3


def _crash_holding(root: str) -> None:
    SourceLock(_catalog(Path(root)), "pg", Owner.this_process("crashing batch")).acquire(wait_s=0)
    os._exit(137)  # as if SIGKILLed: no release row


def test_a_dead_holder_is_replaced_at_once(tmp_path: Path) -> None:
    proc = multiprocessing.get_context("spawn").Process(target=_crash_holding, args=(str(tmp_path / "lake"),))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 137
    t0 = time.monotonic()
    with source_lock(_catalog(tmp_path / "lake"), "pg", wait_s=0):
        pass
    assert time.monotonic() - t0 < 30  # no wait for the lease: its holder is gone


def test_a_live_holder_elsewhere_keeps_the_lock_and_the_error_names_it(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path / "lake")
    remote = SourceLock(catalog, "pg", Owner("another-host", "boot", 42, 7, "airflow cdc_ingest__postgres/run-1"))
    remote.acquire(wait_s=0)
    remote._stop.set()  # no renewals from the "other host" during the test
    waited: list[str] = []
    with pytest.raises(SourceBusyError, match=r"source pg is being ingested by airflow cdc_ingest__postgres/run-1"):
        with source_lock(catalog, "pg", wait_s=3, on_wait=lambda h: waited.append(h.owner.label)):
            pass
    assert waited == ["airflow cdc_ingest__postgres/run-1"]
    # other sources are not affected
    with source_lock(catalog, "maria", wait_s=0):
        pass


def test_a_release_tidies_the_lock_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once an acquire reads ``tidy_after_rows`` rows of its source, the release deletes the rows of the earlier
    locks (every acquire reads them all) and keeps its own; other sources' rows stay. Past TIDY_AFTER_SNAPSHOTS
    snapshots, the older ones are expired."""
    catalog = _catalog(tmp_path / "lake")
    with source_lock(catalog, "other", wait_s=0):
        pass
    for _ in range(3):
        with source_lock(catalog, "pg", wait_s=0):
            pass
    table = catalog.load_table(("cdc_audit", "locks"))
    assert len(table.scan().to_arrow()) == 8 and len(table.metadata.snapshots) == 8  # 4 locks, 2 rows each
    monkeypatch.setattr(lake_rows, "TIDY_AFTER_SNAPSHOTS", 2)
    monkeypatch.setattr(lake_rows, "KEEP_SNAPSHOTS", 1)
    held = SourceLock(catalog, "pg", Owner.this_process(), tidy_after_rows=6)
    held.acquire(wait_s=0)  # reads pg's 6 rows
    held.release()
    table = catalog.load_table(("cdc_audit", "locks"))
    rows = table.scan().to_arrow().to_pylist()
    assert sorted((r["source"], r["lock_id"] == held.lock_id, r["event"]) for r in rows) == [
        ("other", False, "acquired"),
        ("other", False, "released"),
        ("pg", True, "acquired"),
        ("pg", True, "released"),
    ]
    assert len(table.metadata.snapshots) == 1  # only the current snapshot is left
    with source_lock(catalog, "pg", wait_s=0):  # and the lock works as before
        rows = catalog.load_table(("cdc_audit", "locks")).scan().to_arrow().to_pylist()
        assert current_holder(rows, datetime.now(UTC), lambda o: o.alive()) is not None


def _create_audit_namespace(root: str, barrier: Any) -> None:
    catalog = _catalog(Path(root))
    barrier.wait(timeout=60)
    ensure_namespace(catalog, ("cdc_audit",))


def test_processes_creating_the_audit_namespace_at_once_all_go_on(tmp_path: Path) -> None:
    """Two ingest runs starting on a fresh lake both create ``cdc_audit``: pyiceberg's SQL catalog lets the loser
    fail with SQLite's unique-constraint error; ``ensure_namespace`` finds the namespace there and goes on."""
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(2):
        barrier = ctx.Barrier(3)
        root = str(tmp_path / f"lake{round_}")
        procs = [ctx.Process(target=_create_audit_namespace, args=(root, barrier)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0, 0, 0]
        assert _catalog(Path(root)).namespace_exists(("cdc_audit",))
