"""Test-owned captures on the local stack: a spec and tables of their own, removing them, and running
`cdclake ingest` for one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cdclake.connect.client import KafkaConnectClient
from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.connectors import ConnectorSpec, load_spec
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.topics import delete_connector_topics, wait_for_records
from cdclake.lake import LakeConfig
from cdclake.stack import Stack

CDCLAKE = str(Path(sys.executable).parent / "cdclake")


@dataclass(frozen=True)
class OwnedSource:
    """One test-owned capture: its spec (written to a YAML file) and its tables (copies of customers/orders)."""

    which: str  # postgres | mariadb
    spec_path: Path
    spec: ConnectorSpec
    customers: str  # qualified source table names
    orders: str

    @property
    def data_topics(self) -> dict[str, str]:
        return {t: f"{self.spec.topic_prefix}.{t}" for t in (self.customers, self.orders)}


def owned_spec_doc(which: str, tag: str, tables: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A spec document of a test-owned capture of ``which`` (postgres | mariadb): the ``tables`` entries, with a
    connector, topic prefix (and PostgreSQL slot or MariaDB server id) named after ``tag`` (lower-case letters,
    digits and ``_``), everything else as the stack's own spec; ``extra`` keys are added (e.g. ``converters``)."""
    base = load_spec(which)
    doc: dict[str, Any] = {
        "name": f"{tag.replace('_', '-')}-{which[:2]}",
        "connector": base.connector.value,
        "connection_id": base.connection_id,
        "capture_user": base.capture_user,
        "capture_password": base.capture_password,
        "topic_prefix": f"{tag.replace('_', '')}{which[:2]}",
        "database": base.database,
        "tables": tables,
        "snapshot_mode": "initial",
        "signal_table": base.signal_table,
        "signal_channels": ["source"],
        "transaction_metadata": True,
        "notifications": False,
        "heartbeat_interval_ms": 0,
        **extra,
        "kafka_bootstrap_servers": base.kafka_bootstrap_servers,
    }
    if which == "postgres":
        doc["schema"] = "inventory"
        doc["slot_name"] = tag
    else:
        doc["server_id"] = 185000 + zlib.crc32(tag.encode()) % 10000
    return doc


def write_spec(tmp: Path, doc: dict[str, Any]) -> tuple[Path, ConnectorSpec]:
    """The spec document written as ``<tmp>/<name>.yaml``, and the spec loaded from it."""
    path = tmp / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, load_spec(path)


def owned_spec(tmp: Path, which: str, tag: str, **extra: Any) -> OwnedSource:
    """A capture of ``<tag>_customers`` and ``<tag>_orders`` of ``which`` (:func:`owned_spec_doc`, ``extra`` keys
    added), written under ``tmp``."""
    namespace = "inventory" if which == "postgres" else "demo"
    customers, orders = f"{namespace}.{tag}_customers", f"{namespace}.{tag}_orders"
    tables = [
        {"name": customers, "lake": {"mode": "upsert", "partitioning": ["bucket(4, id)"]}},
        {"name": orders, "lake": {"mode": "upsert"}},
    ]
    path, spec = write_spec(tmp, owned_spec_doc(which, tag, tables, **extra))
    return OwnedSource(which, path, spec, customers, orders)


def create_owned_tables(stack: Stack, src: OwnedSource) -> None:
    """The source's tables, like the demo's customers and orders, with one row each (snapshot events)."""
    with app_sql(stack, src.which) as sql:
        for table, like in ((src.customers, "customers"), (src.orders, "orders")):
            if src.which == "postgres":
                sql.execute(f"CREATE TABLE IF NOT EXISTS {table} (LIKE inventory.{like} INCLUDING ALL)")
            else:
                sql.execute(f"CREATE TABLE IF NOT EXISTS {table} LIKE demo.{like}")
        # rows that exist before the connector starts: they arrive as snapshot (op r) events
        sql.execute(f"INSERT INTO {src.customers} (id, name, email, region) VALUES (1, 'before', NULL, 'EU')")
        sql.execute(
            f"INSERT INTO {src.orders} (id, customer_id, amount, status, ordered_on) "
            "VALUES (1, 1, 10.10, 'new', '2024-01-31')"
        )


@contextmanager
def running_capture(stack: Stack, tmp: Path, which: str, tag: str) -> Iterator[OwnedSource]:
    """A test-owned capture (:func:`owned_spec`, written under ``tmp``) with its tables, its connector running and
    its first records in Kafka; removed (:func:`remove_source`) afterwards."""
    client = stack.connect_client()
    apply_demo_schema(stack)
    src = owned_spec(tmp, which, tag)
    try:
        create_owned_tables(stack, src)
        ensure_connector(client, src.spec, stack.database_endpoint(src.spec))
        wait_running(client, src.spec.name)
        wait_for_records(stack.config.kafka_bootstrap, dict.fromkeys(src.data_topics.values(), 1))
        yield src
    finally:
        remove_source(stack, client, which, src.spec, (src.customers, src.orders))


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


def run_ingest(
    spec_path: Path, lake: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 300
) -> subprocess.CompletedProcess[str]:
    """`cdclake ingest` of one spec into ``lake`` with extra arguments and environment; whatever its exit status."""
    full_env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING", **(env or {}))
    return subprocess.run(
        [CDCLAKE, "ingest", "--spec", str(spec_path), "--lake", str(lake), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def cli_ingest(spec_path: Path, lake: Path) -> str:
    """`cdclake ingest` of one spec into ``lake``, which must exit 0 (one at a time: runs commit to the lake's
    ledger); returns its output."""
    proc = run_ingest(spec_path, lake)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def assert_lake_equals_source(src: OwnedSource, lake: Path | LakeConfig) -> None:
    """Reconcile: both tables equal to the source (rows, checksums, keys), and not empty. ``lake``: an embedded
    lake's directory, or any lake."""
    from cdclake.reconcile import reconcile_source

    report = reconcile_source(src.spec, lake=lake if isinstance(lake, LakeConfig) else LakeConfig.embedded(lake))
    assert [t.status for t in report.tables] == ["equal", "equal"], [t.as_dict() for t in report.tables]
    for t in report.tables:
        assert t.source_rows == t.lake_rows > 0 and t.source_checksum == t.lake_checksum


def ingest_until_equal(src: OwnedSource, lake: Path, timeout_s: float = 240) -> int:
    """`cdclake ingest` until the lake equals the source (records may still be on their way after a fault); returns
    the number of ingest runs. Every run must exit 0."""
    deadline = time.monotonic() + timeout_s
    runs = 0
    while True:
        proc = run_ingest(src.spec_path, lake, "--json")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        runs += 1
        try:
            assert_lake_equals_source(src, lake)
            return runs
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(5)
