"""LakeMonitor as the reader of the ledger and the quarantine for display (``cdclake audit``, ``cdclake quarantine
list``, the CDC view): every source at once, and ledger rows written before the typed columns existed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from ledger_rows import append_batches, summary

from cdclake.lake import LakeConfig
from cdclake.monitor import LakeMonitor

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest.fixture
def monitor(tmp_path: Path) -> LakeMonitor:
    lake = LakeConfig.embedded(tmp_path / "lake")
    lake.ensure_dirs()
    return LakeMonitor(lake)


def test_batches_of_every_source_newest_first_by_commit_time(monitor: LakeMonitor) -> None:
    assert not monitor.has_table("batches") and monitor.batches(None) == []
    append_batches(
        monitor.catalog,
        [
            ("pg", "p1", 1, T0, summary("pg", "p1", 3)),
            ("maria", "m1", 1, T0 + timedelta(seconds=10), summary("maria", "m1", 4)),
            ("pg", "p2", 2, T0 + timedelta(seconds=20), summary("pg", "p2", 5)),
            ("pg", "p3", 3, T0 + timedelta(seconds=30), None),  # planned only: not a committed batch
        ],
    )
    assert monitor.has_table("batches")
    assert [(b.source, b.batch_id) for b in monitor.batches(None)] == [("pg", "p2"), ("maria", "m1"), ("pg", "p1")]
    assert [b.batch_id for b in monitor.batches(None, last=2)] == ["p2", "m1"]
    assert [b.batch_id for b in monitor.batches("pg")] == ["p2", "p1"]
    newest = monitor.batches(None)[0]
    assert newest.summary == summary("pg", "p2", 5) and newest.applied == 5


def test_a_batch_without_typed_columns_is_read_from_its_summary(monitor: LakeMonitor) -> None:
    append_batches(monitor.catalog, [("pg", "old", 1, T0, summary("pg", "old", 2))], typed=False)
    (batch,) = monitor.batches("pg")
    assert (batch.records, batch.dead_lettered, batch.applied) == (3, 1, 2)
    assert batch.transactions == {"complete": 2, "held": 1, "mismatched": 0, "expired": 0}
    assert batch.phases == {"plan": 0.25, "apply": 1.0} and batch.table_counts == []


def test_quarantine_of_every_source_by_source_and_table(monitor: LakeMonitor) -> None:
    assert monitor.quarantine(None) == []
    held = pa.table(
        {
            "source": ["pg", "maria", "pg"],
            "batch_id": ["b1", "m1", "b1"],
            "table": ["lake.pg.inventory.items", "lake.maria.demo.items", "lake.pg.inventory.a"],
            "reason": ["r1", "r2", "r3"],
            "recorded_at": pa.array([T0, T0, T0]),
        }
    )
    monitor.catalog.create_namespace_if_not_exists(("cdc_audit",))
    monitor.catalog.create_table(("cdc_audit", "quarantine"), schema=held.schema).append(held)
    assert [(s.source, s.table) for s in monitor.quarantine(None)] == [
        ("maria", "lake.maria.demo.items"),
        ("pg", "lake.pg.inventory.a"),
        ("pg", "lake.pg.inventory.items"),
    ]
    assert [s.table for s in monitor.quarantine("pg")] == ["lake.pg.inventory.a", "lake.pg.inventory.items"]
