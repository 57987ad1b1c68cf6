"""The ingestion caught-up sensor and trigger, against a real embedded lake ledger (pyiceberg, no Spark)."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from cdclake.ingest.progress import committed_offsets, lagging
from cdclake.lake import LakeConfig
from cdclake_airflow.sensors.ingestion import IngestionCaughtUpSensor
from cdclake_airflow.triggers.ingestion import IngestionCaughtUpTrigger

TRIGGER_PATH = "cdclake_airflow.triggers.ingestion.IngestionCaughtUpTrigger"


def _ledger(lake_dir: Path, next_offsets: dict[str, dict[str, int]], seq: int = 1) -> None:
    catalog = load_catalog(**LakeConfig.embedded(lake_dir).pyiceberg_properties())
    catalog.create_namespace_if_not_exists("cdc_audit")
    schema = pa.schema(
        [
            ("source", pa.string()),
            ("batch_id", pa.string()),
            ("seq", pa.int64()),
            ("status", pa.string()),
            ("ranges", pa.string()),
            ("next_offsets", pa.string()),
            ("recorded_at", pa.timestamp("us")),
            ("summary", pa.string()),
        ]
    )
    table = catalog.create_table_if_not_exists(("cdc_audit", "batches"), schema=schema)
    table.append(
        pa.Table.from_pylist(
            [
                {
                    "source": "pg",
                    "batch_id": f"b{seq}",
                    "seq": seq,
                    "status": "committed",
                    "ranges": "{}",
                    "next_offsets": json.dumps(next_offsets),
                    "recorded_at": datetime(2026, 1, 1),
                    "summary": None,
                }
            ],
            schema=schema,
        )
    )


def test_lagging_is_per_partition() -> None:
    assert lagging({("t", 0): 5}, {("t", 0): 5, ("t", 1): 3}) == {("t", 1): 3}
    assert lagging({("t", 0): 9}, {("t", 0): 5}) == {}


def test_committed_offsets_read_the_last_committed_batch(tmp_path: Path) -> None:
    assert committed_offsets("pg", LakeConfig.embedded(tmp_path)) == {}
    _ledger(tmp_path, {"pg.inventory.items": {"0": 4}}, seq=1)
    _ledger(tmp_path, {"pg.inventory.items": {"0": 9}, "pg.transaction": {"0": 2}}, seq=2)
    assert committed_offsets("pg", LakeConfig.embedded(tmp_path)) == {
        ("pg.inventory.items", 0): 9,
        ("pg.transaction", 0): 2,
    }


def test_trigger_serializes_and_fires_once_caught_up(tmp_path: Path) -> None:
    trigger = IngestionCaughtUpTrigger("pg", {"pg.inventory.items": {"0": 9}}, str(tmp_path), poll_interval=0.01)
    assert trigger.serialize() == (
        TRIGGER_PATH,
        {
            "source": "pg",
            "target_offsets": {"pg.inventory.items": {"0": 9}},
            "lake_dir": str(tmp_path),
            "poll_interval": 0.01,
        },
    )
    _ledger(tmp_path, {"pg.inventory.items": {"0": 9}})

    async def first_event() -> dict:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("no event")

    assert asyncio.run(asyncio.wait_for(first_event(), timeout=30)) == {"status": "caught_up", "source": "pg"}


def test_sensor_pokes_against_explicit_targets(tmp_path: Path) -> None:
    _ledger(tmp_path, {"pg.inventory.items": {"0": 3}})
    behind = IngestionCaughtUpSensor(
        task_id="s",
        source="pg",
        target_offsets={"pg.inventory.items": {"0": 5}},
        lake_dir=str(tmp_path),
        deferrable=False,
    )
    assert behind.poke({}) is False
    ahead = IngestionCaughtUpSensor(
        task_id="s2",
        source="pg",
        target_offsets={"pg.inventory.items": {"0": 3}},
        lake_dir=str(tmp_path),
        deferrable=False,
    )
    assert ahead.poke({}) is True


@pytest.mark.parametrize("field", ["source", "target_offsets", "lake_dir"])
def test_sensor_templates_its_identifiers(field: str) -> None:
    assert field in IngestionCaughtUpSensor.template_fields
