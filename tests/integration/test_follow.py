"""``cdclake ingest --follow`` on the real local stack: a test-owned PostgreSQL capture (its own tables, connector,
topic prefix and slot), followed by one long-lived ingest process on one Spark session.

* changes written while it runs reach the lake, which ends equal to the source (rows, checksums, keys);
* one row's way from its source commit to a committed Iceberg snapshot is printed (a figure, not asserted;
  ``benchmarks/`` measures it);
* SIGTERM while a workload streams in stops it between batches: exit 0, ``stopped_by: signal``, no batch left
  planned in the ledger;
* a restarted follower goes on from the committed offsets, and the lake ends equal to the source again;
* Airflow's follower DAG (``airflow dags test cdc_follow__<source>``, a run of ``CDC_FOLLOW_RUN_FOR``) applies the
  changes made before it, logs a line per batch, checks the run's summary and emits the changed tables' Asset
  events.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from airflow_runs import airflow_test_env, run_dags_test
from owned_sources import (
    CDCLAKE,
    OwnedSource,
    assert_lake_equals_source,
    running_capture,
)

from cdclake.demo.database import app_sql
from cdclake.demo.workload import run_workload
from cdclake.lake import LakeConfig
from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

RUN = secrets.token_hex(3)


@dataclass
class Follower:
    """One ``cdclake ingest --follow`` process, its output in files."""

    proc: subprocess.Popen[str]
    stdout: IO[str]
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 180) -> dict[str, Any]:
        """SIGTERM; once it exited 0, the run's summary (the last of its JSON Lines) with ``batch_lines``: the
        summaries of its batches that committed (the lines before)."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=timeout_s)
        self.stdout.seek(0)
        out = self.stdout.read()
        assert rc == 0, out[-2000:] + self.stderr()[-4000:]
        *batches, result = (json.loads(line) for line in out.splitlines())
        return {**result, "batch_lines": [b for b in batches if b["batch_id"] is not None]}


def _start(src: OwnedSource, lake: Path, tmp: Path, name: str, *more: str) -> Follower:
    LakeConfig.embedded(lake).ensure_dirs()  # its catalog exists before the follower's first batch: reconcile reads it
    stdout = (tmp / f"{name}.out").open("w+")
    stderr_path = tmp / f"{name}.err"
    env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING")
    proc = subprocess.Popen(
        [CDCLAKE, "ingest", "--spec", str(src.spec_path), "--lake", str(lake), "--follow", "--poll", "0.5", "--json"]
        + list(more),
        env=env,
        stdout=stdout,
        stderr=stderr_path.open("w"),
        text=True,
    )
    return Follower(proc, stdout, stderr_path)


def _wait_equal(src: OwnedSource, lake: Path, follower: Follower, timeout_s: float = 240) -> float:
    """Seconds until the lake equals the source, the follower running all along."""
    t0 = time.monotonic()
    while True:
        assert follower.proc.poll() is None, f"the follower exited ({follower.proc.returncode}): {follower.stderr()}"
        try:
            assert_lake_equals_source(src, lake)
            return time.monotonic() - t0
        except AssertionError:
            if time.monotonic() - t0 > timeout_s:
                raise AssertionError(f"not equal after {timeout_s} s; follower: {follower.stderr()[-4000:]}") from None
            time.sleep(1)


def _pending_batch(src: OwnedSource, lake: Path) -> str | None:
    from cdclake.monitor import LakeMonitor

    _, pending = LakeMonitor(LakeConfig.embedded(lake)).ledger(src.spec.name)
    return pending.batch_id if pending else None


@pytest.fixture(scope="module")
def capture(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnedSource]:
    with running_capture(stack, tmp_path_factory.mktemp("follow-specs"), "postgres", f"follow_{RUN}") as src:
        yield src


def _row_visible_s(stack: Stack, src: OwnedSource, lake: Path, row_id: int, timeout_s: float = 60) -> float:
    """Seconds from one insert's commit in PostgreSQL until a committed Iceberg snapshot holds the row."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import EqualTo

    from cdclake.lake.names import spec_table_parts

    catalog = load_catalog(**LakeConfig.embedded(lake).pyiceberg_properties())
    identifier = spec_table_parts(src.spec, src.customers)
    with app_sql(stack, "postgres") as sql:
        sql.execute(f"INSERT INTO {src.customers} (id, name, email, region) VALUES (%s, 'fresh', NULL, 'EU')", [row_id])
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        table = catalog.load_table(identifier)
        if table.scan(row_filter=EqualTo("id", row_id), selected_fields=("id",)).to_arrow().num_rows:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"row {row_id} not in {identifier} after {timeout_s} s")


def test_a_follower_applies_changes_as_they_come_stops_on_sigterm_and_resumes(
    capture: OwnedSource, stack: Stack, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    follower = _start(capture, lake, tmp_path, "first")
    try:
        print(f"snapshot rows equal after {_wait_equal(capture, lake, follower):.1f} s (Spark's start included)")
        with app_sql(stack, "postgres") as sql:
            run_workload(sql, capture.customers, capture.orders, 10_000)
        print(f"workload equal {_wait_equal(capture, lake, follower):.1f} s after its last commit")
        print(f"one insert visible in Iceberg after {_row_visible_s(stack, capture, lake, 50_000):.1f} s")

        # SIGTERM while changes stream in: the batch in progress (if any) commits, nothing stays planned
        with app_sql(stack, "postgres") as sql:
            run_workload(sql, capture.customers, capture.orders, 20_000)
        time.sleep(1.5)
        first = follower.stop()
    finally:
        if follower.proc.poll() is None:
            follower.proc.kill()
    assert first["mode"] == "follow" and first["stopped_by"] == "signal", first
    assert first["committed_batches"] >= 3 and first["checks"]["ok"], first
    # a JSON line per batch as it ended: the run's committed batches, each once
    lines = first["batch_lines"]
    assert len(lines) == first["committed_batches"] == len({b["batch_id"] for b in lines}), lines
    assert sum(b["records"] for b in lines) == first["records"], first
    assert "SIGTERM received: stopping after the current batch" in follower.stderr()
    assert _pending_batch(capture, lake) is None

    # changes made while no follower runs, then a new follower: it goes on from the committed offsets; it keeps 2
    # snapshots of each table (tidied after its first batch that changes one, then every 100th)
    with app_sql(stack, "postgres") as sql:
        run_workload(sql, capture.customers, capture.orders, 30_000)
    before = _snapshot_ids(capture, lake)
    again = _start(capture, lake, tmp_path, "again", "--keep-snapshots", "2")
    try:
        _wait_equal(capture, lake, again)
        second = again.stop()
    finally:
        if again.proc.poll() is None:
            again.proc.kill()
    assert second["committed_batches"] >= 1 and second["checks"]["ok"], second
    assert second["last_batch"]["redo"] is False
    assert _pending_batch(capture, lake) is None
    assert_lake_equals_source(capture, lake)
    # the first follower's snapshots: gone but for one at most (the tidy-up after the second follower's first batch
    # of customers kept its newest 2, that batch's own commits and maybe the one before); later batches add up to 3
    after = _snapshot_ids(capture, lake)
    print(f"customers' snapshots: {len(before)} before the second follower, {len(after)} after its batches")
    assert len(before) > 2 and len(before & after) <= 1, (before, after)
    assert len(after) <= 2 + 3 * (second["committed_batches"] - 1), (after, second)


def _snapshot_ids(src: OwnedSource, lake: Path) -> set[int]:
    """The snapshots of the source's customers table."""
    from pyiceberg.catalog import load_catalog

    from cdclake.lake.names import spec_table_parts

    catalog = load_catalog(**LakeConfig.embedded(lake).pyiceberg_properties())
    return {s.snapshot_id for s in catalog.load_table(spec_table_parts(src.spec, src.customers)).metadata.snapshots}


def test_the_airflow_follower_dag_runs_a_bounded_follower_and_publishes_what_it_changed(
    capture: OwnedSource, stack: Stack, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    LakeConfig.embedded(lake).ensure_dirs()
    env = airflow_test_env(stack, tmp_path / "airflow", lake, tmp_path / "runs")
    env.update(
        {
            "CDC_SPEC_DIR": str(capture.spec_path.parent),
            "CDC_SOURCES": capture.spec.name,
            "CDC_FOLLOW_SOURCES": capture.spec.name,
            "CDC_FOLLOW_RUN_FOR": "15s",
        }
    )
    with app_sql(stack, "postgres") as sql:
        run_workload(sql, capture.customers, capture.orders, 40_000)

    dag_id = f"cdc_follow__{capture.spec.name}"
    succeeded, output = run_dags_test(env, dag_id)
    assert succeeded, output[-8000:]
    assert "--follow" in output and "follower stopped (time)" in output, output[-8000:]
    assert "records," in output and "applied" in output, output[-8000:]  # the follower's line per batch
    assert_lake_equals_source(capture, lake)
    summaries = list((tmp_path / "runs" / dag_id).rglob("follow.json"))
    assert len(summaries) == 1, summaries
    summary = json.loads(summaries[0].read_text())
    assert summary["mode"] == "follow" and summary["stopped_by"] == "time" and summary["checks"]["ok"], summary
    assert summary["committed_batches"] >= 1 and _pending_batch(capture, lake) is None
    for table in summary["changed_tables"]:
        assert f"Asset event for {table}" in output, output[-8000:]
    assert summary["changed_tables"], summary
