"""cdclake.monitor: lag, pending work, batches and freshness, on a real embedded lake (pyiceberg, no Spark)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchRecord, batch_columns, ledger_schema
from cdclake.ingest.lock import ACQUIRED, Owner, locks_schema
from cdclake.ingest.offsets import OffsetRange, ranges_to_json
from cdclake.lake import LakeConfig
from cdclake.monitor import Batch, LakeMonitor, PartitionLag, PendingWork, partition_lag, percentile, row_freshness

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def test_partition_lag_counts_from_the_committed_offset_or_the_earliest() -> None:
    lag = partition_lag(
        {("pg.a", 0): 0, ("pg.b", 0): 40},
        {("pg.a", 0): 10, ("pg.b", 0): 50, ("pg.c", 0): 0},
        {("pg.a", 0): 7},
    )
    assert [(p.topic, p.committed, p.lag) for p in lag] == [("pg.a", 7, 3), ("pg.b", 40, 10), ("pg.c", 0, 0)]


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 0.5, None),
        ([4.0], 0.99, 4.0),
        ([3.0, 1.0, 2.0, 4.0], 0.5, 2.0),
        ([float(i) for i in range(1, 101)], 0.99, 99.0),
    ],
)
def test_percentile_by_nearest_rank(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_pending_work_says_what_there_is_to_do() -> None:
    assert not PendingWork() and PendingWork().describe() == "nothing new"
    behind = PendingWork(lag=[PartitionLag("pg.inventory.orders", 0, 12, 10), PartitionLag("pg.transaction", 0, 4, 4)])
    assert behind and behind.records == 2 and behind.describe() == "2 new record(s) (pg.inventory.orders/0 +2)"
    redo = PendingWork(redo="b1")
    assert redo and redo.describe() == "batch b1 interrupted, to redo"
    assert PendingWork(releases=("lake.pg.inventory.orders",)).describe().startswith("quarantine release")


def test_batch_latency_and_throughput() -> None:
    batch = Batch(
        batch_id="b",
        seq=1,
        committed_at=T0 + timedelta(seconds=30),
        planned_at=T0 + timedelta(seconds=20),
        records=500,
        dead_lettered=0,
        tables={"lake.pg.inventory.orders": {"applied": 7, "skipped": 1}},
        table_counts=[],
        transactions={"complete": 2},
        phases={"plan": 1.0},
        source_ts={"first": (T0 - timedelta(seconds=40)).isoformat(), "last": T0.isoformat()},
        problems=[],
        redo=False,
        status="committed",
    )
    assert (batch.duration_s, batch.throughput, batch.latency_s, batch.latency_newest_s) == (10.0, 50.0, 70.0, 30.0)
    assert (batch.applied, batch.skipped) == (7, 1)


@pytest.fixture
def lake(tmp_path: Path) -> LakeConfig:
    config = LakeConfig.embedded(tmp_path / "lake")
    config.ensure_dirs()
    return config


def _ledger_rows(monitor: LakeMonitor, records: list[tuple[BatchRecord, dict[str, Any] | None]]) -> None:
    catalog = monitor.catalog
    catalog.create_namespace_if_not_exists(("cdc_audit",))
    table = catalog.create_table_if_not_exists(("cdc_audit", "batches"), schema=ledger_schema())
    rows = []
    for rec, summary in records:
        rows.append(
            {
                "source": rec.source,
                "batch_id": rec.batch_id,
                "seq": rec.seq,
                "status": rec.status,
                "ranges": ranges_to_json(rec.ranges),
                "next_offsets": json.dumps({"pg.inventory.orders": {"0": 10}}),
                "recorded_at": rec.recorded_at,
                "summary": json.dumps(summary) if summary is not None else None,
                **{k: list(v.items()) if isinstance(v, dict) else v for k, v in batch_columns(rec, summary).items()},
            }
        )
    table.append(pa.Table.from_pylist(rows, schema=ledger_schema()))


def test_batches_pair_committed_rows_with_their_planned_rows(lake: LakeConfig) -> None:
    monitor = LakeMonitor(lake)
    assert monitor.batches("pg") == [] and monitor.ledger("pg") == (None, None)
    ranges = [OffsetRange("pg.inventory.orders", 0, 0, 10)]
    summary = {
        "records": 10,
        "dead_lettered": 1,
        "tables": {"lake.pg.inventory.orders": {"applied": 8, "skipped": 1, "dead_lettered": 1}},
        "transactions": {"counts": {"complete": 3, "held": 1}},
        "phases_s": {"plan": 0.5, "apply": 2.0},
        "source_ts": {"first": T0.isoformat(), "last": (T0 + timedelta(seconds=5)).isoformat()},
        "checks": {"ok": True, "problems": []},
        "status": "committed",
    }
    _ledger_rows(
        monitor,
        [
            (BatchRecord("pg", "b1", 1, PLANNED, ranges, {}, T0 + timedelta(seconds=10)), None),
            (BatchRecord("pg", "b1", 1, COMMITTED, ranges, {}, T0 + timedelta(seconds=14)), summary),
            (BatchRecord("pg", "b2", 2, PLANNED, ranges, {}, T0 + timedelta(seconds=20)), None),
            (BatchRecord("maria", "m1", 1, PLANNED, ranges, {}, T0), None),
        ],
    )
    [batch] = monitor.batches("pg")
    assert (batch.batch_id, batch.records, batch.applied, batch.dead_lettered) == ("b1", 10, 8, 1)
    assert batch.duration_s == 4.0 and batch.latency_s == 14.0
    assert batch.transactions == {"complete": 3, "held": 1, "mismatched": 0, "expired": 0}
    committed, pending = monitor.ledger("pg")
    assert committed is not None and committed.batch_id == "b1" and pending is not None and pending.batch_id == "b2"


def test_a_lock_held_by_a_live_process_is_reported(lake: LakeConfig) -> None:
    monitor = LakeMonitor(lake)
    assert monitor.lock_holder("pg") is None
    catalog = monitor.catalog
    catalog.create_namespace_if_not_exists(("cdc_audit",))
    table = catalog.create_table(("cdc_audit", "locks"), schema=locks_schema())
    now = datetime.now(UTC)
    me = Owner.this_process("a test")
    row = {"source": "pg", "lock_id": "L1", "event": ACQUIRED, "owner": me.to_json(), "at": now,
           "expires_at": now + timedelta(minutes=2)}  # fmt: skip
    table.append(pa.Table.from_pylist([row], schema=locks_schema()))
    holder = monitor.lock_holder("pg")
    assert holder is not None and holder.lock_id == "L1" and holder.owner.label == "a test"
    assert monitor.lock_holder("maria") is None


def test_row_freshness_is_source_commit_to_the_snapshot_that_made_the_row_visible(lake: LakeConfig) -> None:
    monitor = LakeMonitor(lake)
    schema = pa.schema([("id", pa.int64()), ("_cdc_source_ts", pa.timestamp("us", tz="UTC")),
                        ("_cdc_ingested_at", pa.timestamp("us", tz="UTC"))])  # fmt: skip
    monitor.catalog.create_namespace_if_not_exists(("pg",))
    table = monitor.catalog.create_table(("pg", "t"), schema=schema)
    written = datetime.now(UTC)
    rows = [{"id": 1, "_cdc_source_ts": written - timedelta(seconds=30), "_cdc_ingested_at": written}]
    table.append(pa.Table.from_pylist(rows, schema=schema))
    commit = table.refresh().current_snapshot().timestamp_ms / 1000
    [seconds] = row_freshness(table)
    assert seconds == pytest.approx(commit - (written.timestamp() - 30), abs=0.01)
    assert 30 <= seconds < 30 + (time.time() - written.timestamp()) + 1
    # changes committed in the source before `since` (an earlier run's) are not measured
    assert row_freshness(table, since=written - timedelta(seconds=31)) == [seconds]
    assert row_freshness(table, since=written - timedelta(seconds=29)) == []
