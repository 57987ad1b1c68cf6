"""Kill-and-rerun: a crash at any point of a batch, then a rerun, loses nothing and duplicates nothing.

Runs `cdclake replay` as a subprocess over a recorded workload (two tables: one upsert, one append),
crashing it at each injected point (CDC_FAULT_AT, an abrupt os._exit like SIGKILL) and at random
moments with SIGKILL (several seeds), rerunning after each crash, then compares the lake with the expected state.
No broker needed: replay runs exactly the ingestion job's code on recorded records.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog

from cdclake.lake import LakeConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "ingest"))
from events import PgTable  # noqa: E402

pytestmark = [pytest.mark.integration("spark"), pytest.mark.spark]

CDCLAKE = str(Path(sys.executable).parent / "cdclake")
#: seeds of the random SIGKILL moments (each run starts in about 8-12 s, then does 25-record batches)
KILL_SEEDS = (7, 8)
SPEC = """\
name: eo
connector: postgresql
connection_id: cdc_eo
capture_user: debezium
capture_password: ${env:CDC_EO_PASSWORD}
topic_prefix: eo
database: demo
schema: inventory
signal_table: inventory.debezium_signal
tables:
  - name: inventory.items
  - name: inventory.events_log
    lake:
      mode: append
"""


def _workload(seed: int) -> tuple[list[dict[str, Any]], dict[int, tuple[Any, ...]], int]:
    rng = random.Random(seed)
    items = PgTable(prefix="eo", table="items")
    log = PgTable(prefix="eo", table="events_log", partition=0)
    state: dict[int, tuple[Any, ...]] = {}
    lsn = 1000
    for step in range(60):
        lsn += 10
        key = rng.randrange(12)
        if key in state and rng.random() < 0.25:
            items.delete({"id": key}, lsn=lsn)
            del state[key]
        elif key in state:
            row = {"id": key, "name": f"u{step}", "qty": step}
            items.update(row, lsn=lsn)
            state[key] = (key, f"u{step}", step)
        else:
            row = {"id": key, "name": f"c{step}", "qty": step}
            items.create(row, lsn=lsn)
            state[key] = (key, f"c{step}", step)
        log.create({"id": step, "name": "evt", "qty": step}, lsn=lsn + 1)
    records = items.take() + log.take()
    return records, state, 60


def _replay(workload: Path, lake: Path, spec: Path, fault: str | None = None, kill_after: float | None = None) -> int:
    env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING")
    env.pop("CDC_FAULT_AT", None)
    if fault:
        env["CDC_FAULT_AT"] = fault
    cmd = [CDCLAKE, "replay", str(workload), "--lake", str(lake), "--spec", str(spec), "--max-records", "25"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=kill_after) if kill_after else proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return -9
    if proc.returncode not in (0, 137):
        raise AssertionError(f"replay failed ({proc.returncode}):\n{out.decode(errors='replace')[-3000:]}")
    return proc.returncode


def test_crash_at_any_point_then_rerun_is_exactly_once(tmp_path: Path) -> None:
    seed = 7
    records, expected, log_events = _workload(seed)
    workload = tmp_path / "workload.jsonl"
    workload.write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = tmp_path / "eo.yaml"
    spec.write_text(SPEC)
    lake = tmp_path / "lake"
    faults = ["planned", "tombstones", "table-partial", "table:1", "table:2", "before-commit", "after-commit"]
    for fault in faults:  # each run crashes once, at that point of some batch, after earlier batches committed
        assert _replay(workload, lake, spec, fault=fault) == 137, fault
    # SIGKILL at a random moment of a run, one per seed (a run may finish first, not all of them)
    killed = [_replay(workload, lake, spec, kill_after=random.Random(s).uniform(6.0, 30.0)) for s in KILL_SEEDS]
    assert -9 in killed, killed
    assert _replay(workload, lake, spec) == 0
    assert _replay(workload, lake, spec) == 0  # once more: nothing new, nothing changes

    catalog = load_catalog(**LakeConfig.embedded(lake).pyiceberg_properties())
    items = catalog.load_table(("eo", "inventory", "items")).scan(selected_fields=("id", "name", "qty")).to_arrow()
    assert sorted(tuple(r.values()) for r in items.to_pylist()) == sorted(expected.values())
    log = catalog.load_table(("eo", "inventory", "events_log")).scan(selected_fields=("id", "_cdc_offset")).to_arrow()
    ids = sorted(r["id"] for r in log.to_pylist())
    assert ids == list(range(log_events)), "append table must hold every event exactly once"
    ledger = (
        catalog.load_table(("cdc_audit", "batches"))
        .scan(row_filter="source == 'eo' and status == 'committed'")
        .to_arrow()
    )
    covered: dict[tuple[str, str], list[list[int]]] = {}
    for row in ledger.to_pylist():
        for topic, parts in json.loads(row["ranges"]).items():
            for partition, se in parts.items():
                covered.setdefault((topic, partition), []).append(se)
    for tp, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), (tp, spans)
    assert {tp: spans[-1][1] for tp, spans in covered.items()} == {
        ("eo.inventory.items", "0"): sum(1 for r in records if r["topic"] == "eo.inventory.items"),
        ("eo.inventory.events_log", "0"): log_events,
    }
