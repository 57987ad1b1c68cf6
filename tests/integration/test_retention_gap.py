"""Records deleted from Kafka before they were ingested, end to end on the local stack.

A test-owned PostgreSQL table is captured by its own connector (transaction metadata off, so that nothing waits
for the events of transactions whose records are gone):

1. ``cdclake ingest`` ingests the snapshot (3 rows; the ledger continues at offset 3);
2. five more rows are written (offsets 3..7), then the records before offset 6 are deleted from the data topic
   (``AdminClient.delete_records``, what retention and ``kafka-delete-records`` do);
3. ``cdclake ingest`` stops before reading anything, exits non-zero and names the topic, the partition and the
   missing offsets 3..5, and the flag that accepts them; the lake and the ledger are unchanged;
4. ``cdclake ingest --accept-gap TOPIC:0 --accepted-by ...`` ingests from the log start (offsets 6 and 7), and the
   batch summary (the file and the ledger's committed row) records the gap and who accepted it;
5. a run without the flag has nothing left to accept.

The module owns its table, connector, topics and slot, and removes them at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from owned_sources import CDCLAKE, cli_ingest, remove_source
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import EqualTo

from cdclake.connect.client import KafkaConnectClient
from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.connectors import ConnectorSpec, load_spec
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.topics import wait_for_records
from cdclake.lake import LakeConfig
from cdclake.lake import rows as lake_rows
from cdclake.lake.audit import BATCHES
from cdclake.lake.names import audit_table
from cdclake.reconcile import lake_identifier
from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

RUN = secrets.token_hex(3)
#: Records before this offset of the data topic are deleted (the snapshot is offsets 0..2, the inserts 3..7).
DELETE_BEFORE = 6


@dataclass(frozen=True)
class Source:
    spec_path: Path
    spec: ConnectorSpec
    table: str

    @property
    def topic(self) -> str:
        return f"{self.spec.topic_prefix}.{self.table}"


def _spec_file(tmp: Path) -> Source:
    base = load_spec("postgres")
    table = f"inventory.rg_{RUN}_items"
    doc: dict[str, Any] = {
        "name": f"rg-pg-{RUN}",
        "connector": base.connector.value,
        "connection_id": base.connection_id,
        "capture_user": base.capture_user,
        "capture_password": base.capture_password,
        "topic_prefix": f"rgpg{RUN}",
        "database": base.database,
        "schema": "inventory",
        "slot_name": f"rg_{RUN}",
        "tables": [{"name": table, "lake": {"mode": "upsert"}}],
        "snapshot_mode": "initial",
        "signal_table": base.signal_table,
        "signal_channels": ["source"],
        # without transaction metadata: the ENDs of transactions whose events were deleted would hold the batch
        "transaction_metadata": False,
        "notifications": False,
        "heartbeat_interval_ms": 0,
        "kafka_bootstrap_servers": base.kafka_bootstrap_servers,
    }
    path = tmp / "rg-postgres.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return Source(path, load_spec(path), table)


@pytest.fixture(scope="module")
def source(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """The test-owned table and its connector, after the snapshot of three rows."""
    client = KafkaConnectClient(stack.config.connect_url)
    apply_demo_schema(stack)
    src = _spec_file(tmp_path_factory.mktemp("retention-gap-spec"))
    try:
        with app_sql(stack, "postgres") as sql:
            sql.execute(f"CREATE TABLE {src.table} (id bigint PRIMARY KEY, name text NOT NULL)")
            sql.executemany(
                f"INSERT INTO {src.table} (id, name) VALUES (%s, %s)", [(i, f"item {i}") for i in (1, 2, 3)]
            )
        ensure_connector(client, src.spec, stack.database_endpoint(src.spec))
        wait_running(client, src.spec.name)
        wait_for_records(stack.config.kafka_bootstrap, {src.topic: 3}, timeout_s=240)
        yield src
    finally:
        remove_source(stack, client, "postgres", src.spec, (src.table,))


def _ingest(src: Source, lake: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`cdclake ingest` of the source into ``lake`` with extra arguments (its exit status is the caller's to check)."""
    env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING")
    return subprocess.run(
        [CDCLAKE, "ingest", "--spec", str(src.spec_path), "--lake", str(lake), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _lake_ids(lake: LakeConfig, src: Source) -> list[int]:
    catalog = load_catalog(**lake.pyiceberg_properties())
    table = catalog.load_table(lake_identifier(src.spec, src.spec.tables[0]))
    return sorted(table.scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())


def _committed_summaries(lake: LakeConfig, src: Source) -> list[dict[str, Any]]:
    """The summaries of the source's committed batches, in ledger order."""
    catalog = load_catalog(**lake.pyiceberg_properties())
    ledger = catalog.load_table(lake_rows.identifier(audit_table(BATCHES)))
    rows = ledger.scan(row_filter=EqualTo("source", src.spec.name)).to_arrow().to_pylist()
    return [json.loads(r["summary"]) for r in sorted(rows, key=lambda r: r["seq"]) if r["status"] == "committed"]


def _delete_records(bootstrap: str, topic: str, before: int) -> int:
    """Delete the records of ``topic``'s partition 0 before offset ``before``; returns the new log start."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    [future] = admin.delete_records([TopicPartition(topic, 0, before)], operation_timeout=30).values()
    return int(future.result(timeout=60).low_watermark)


def test_deleted_records_stop_ingest_until_the_gap_is_accepted(stack: Stack, source: Source, tmp_path: Path) -> None:
    live = tmp_path / "lake"
    lake = LakeConfig.embedded(live)
    bootstrap = stack.config.kafka_bootstrap
    cli_ingest(source.spec_path, live)
    assert _lake_ids(lake, source) == [1, 2, 3]

    with app_sql(stack, "postgres") as sql:
        sql.executemany(
            f"INSERT INTO {source.table} (id, name) VALUES (%s, %s)", [(i, f"item {i}") for i in range(4, 9)]
        )
    wait_for_records(bootstrap, {source.topic: 8}, timeout_s=240)
    assert _delete_records(bootstrap, source.topic, DELETE_BEFORE) == DELETE_BEFORE

    refused = _ingest(source, live)
    err = " ".join(refused.stderr.split())
    assert refused.returncode != 0, refused.stdout[-2000:] + refused.stderr[-4000:]
    assert "OffsetGapError" in err and "nothing was read" in err, err[-4000:]
    assert f"{source.topic}[0]: offsets 3..5 were deleted before they were ingested (log starts at 6)" in err
    assert f"--accept-gap {source.topic}:0" in err
    assert _lake_ids(lake, source) == [1, 2, 3]
    assert len(_committed_summaries(lake, source)) == 1

    summary_json = tmp_path / "accepted.json"
    accepted = _ingest(
        source,
        live,
        "--accept-gap",
        f"{source.topic}:0",
        "--accepted-by",
        "retention-gap-test",
        "--summary-json",
        str(summary_json),
    )
    assert accepted.returncode == 0, accepted.stdout[-2000:] + accepted.stderr[-4000:]
    assert "accepted gap (by retention-gap-test)" in " ".join(accepted.stderr.split())
    summary = json.loads(summary_json.read_text())
    assert summary["records"] == 2 and summary["offsets"] == {source.topic: {"0": [6, 8]}}
    [gap] = summary["accepted_gaps"]
    assert {k: v for k, v in gap.items() if k != "accepted_at"} == {
        "topic": source.topic,
        "partition": 0,
        "kind": "deleted",
        "committed": 3,
        "resumed_at": 6,
        "log_end": 8,
        "accepted_by": "retention-gap-test",
        "detail": f"{source.topic}[0]: offsets 3..5 were deleted before they were ingested (log starts at 6)",
    }
    assert _committed_summaries(lake, source)[-1]["accepted_gaps"] == [gap]
    assert _lake_ids(lake, source) == [1, 2, 3, 7, 8]  # 4, 5 and 6 were deleted from Kafka

    again = _ingest(source, live, "--summary-json", str(tmp_path / "again.json"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-4000:]
    assert json.loads((tmp_path / "again.json").read_text())["status"] == "no-new-records"
