"""Test-owned captures on the local stack: removing one, and running `cdclake ingest` for one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from cdclake.connect.client import KafkaConnectClient
from cdclake.connectors import ConnectorSpec
from cdclake.demo.database import app_sql
from cdclake.demo.topics import delete_connector_topics
from cdclake.stack import Stack

CDCLAKE = str(Path(sys.executable).parent / "cdclake")


def remove_source(
    stack: Stack, client: KafkaConnectClient, which: str, spec: ConnectorSpec, tables: Iterable[str]
) -> None:
    """Remove a test-owned capture: its connector (stopped, offsets reset, deleted), its PostgreSQL slot, its
    tables and its topics."""
    client.remove(spec.name)
    if which == "postgres":
        with stack.service("postgres").connect("admin", dbname="demo") as conn:
            for _ in range(20):  # the slot stays active until the task has shut down
                row = conn.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", [spec.slot_name]
                ).fetchone()
                if row is None:
                    break
                if not row[0]:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", [spec.slot_name])
                    break
                time.sleep(1)
    with app_sql(stack, which) as sql:
        for table in tables:
            sql.execute(f"DROP TABLE IF EXISTS {table}")
    delete_connector_topics(stack.config.kafka_bootstrap, spec.topic_prefix)


def cli_ingest(spec_path: Path, lake: Path) -> str:
    """`cdclake ingest` of one spec into ``lake``, which must exit 0 (one at a time: runs commit to the lake's
    ledger); returns its output."""
    env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING")
    proc = subprocess.run(
        [CDCLAKE, "ingest", "--spec", str(spec_path), "--lake", str(lake)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr
