"""The DAGs for real: ``airflow dags test`` against the local stack, in a throw-away AIRFLOW_HOME and lake.

Order matters (one module, one Airflow home): connectors first, then a snapshot, then an ingest run.
Set ``CDC_KEEP_STACK=1`` to leave a stack that was started for the tests running.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow_runs import PROJECT_ROOT, airflow_test_env, run_dags_test

from cdclake.connectors import load_spec
from cdclake.lake import LakeConfig
from cdclake.orchestration import lake_row_count
from cdclake.stack import Stack

pytestmark = pytest.mark.integration("airflow")

INGEST_JOB = PROJECT_ROOT / "jobs" / "ingest.py"


@pytest.fixture(scope="module")
def airflow_env(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment of the ``airflow`` subprocesses: temp home (SQLite DB migrated), temp lake, stack connections."""
    yield airflow_test_env(
        stack,
        tmp_path_factory.mktemp("airflow-home"),
        tmp_path_factory.mktemp("lake"),
        tmp_path_factory.mktemp("runs"),
    )


def dags_test(env: dict[str, str], dag_id: str, conf: dict[str, object] | None = None) -> str:
    """Run ``airflow dags test`` and return its output; fail with the output's tail unless the run succeeded."""
    succeeded, output = run_dags_test(env, dag_id, conf)
    assert succeeded, output[-8000:]
    return output


def test_cdc_connectors_registers_and_runs_the_connectors(airflow_env: dict[str, str], stack: Stack) -> None:
    dags_test(airflow_env, "cdc_connectors")
    client = stack.connect_client()
    for name in ("postgres", "mariadb"):
        status = client.status(load_spec(name).connect_name)
        assert status.is_running, status.describe()
    # the health check passes on healthy connectors (and fails on FAILED ones: tests/dags)
    output = dags_test(airflow_env, "cdc_connectors_health")
    assert "postgres connector=RUNNING" in output


def _seed_customers(stack: Stack, n: int) -> list[int]:
    """Insert ``n`` new customers as the app user; return their ids."""
    ids = [int(time.time() * 1000) % 10**9 * 100 + i for i in range(n)]
    with stack.service("postgres").connect("app", dbname="demo") as conn:
        conn.execute((PROJECT_ROOT / "include/sql/postgres/demo_schema.sql").read_text())
        for cid in ids:
            conn.execute(
                "INSERT INTO inventory.customers (id, name, email, region) VALUES (%s, %s, %s, %s)",
                [cid, f"airflow-it-{uuid.uuid4().hex[:6]}", f"c{cid}@example.com", "EU"],
            )
    return ids


def test_cdc_snapshot_signals_waits_and_verifies(airflow_env: dict[str, str], stack: Stack) -> None:
    _seed_customers(stack, 3)
    verify = INGEST_JOB.is_file()
    output = dags_test(
        airflow_env,
        "cdc_snapshot",
        {"source": "postgres", "tables": ["inventory.customers"], "type": "incremental", "verify": verify},
    )
    assert "Snapshot of signal" in output and "completed" in output
    if verify:
        assert "inventory.customers: source" in output  # the row counts were compared


@pytest.mark.skipif(not INGEST_JOB.is_file(), reason="jobs/ingest.py has not landed yet")
def test_cdc_ingest_lands_new_rows_in_the_lake(airflow_env: dict[str, str], stack: Stack) -> None:
    ids = _seed_customers(stack, 2)
    output = dags_test(airflow_env, "cdc_ingest__postgres")
    assert "Asset event for lake.pg.inventory.customers" in output
    # one Asset event per changed table (others may write to the shared demo tables), with the batch id
    with sqlite3.connect(Path(airflow_env["AIRFLOW_HOME"]) / "airflow.db") as db:
        events = db.execute(
            "SELECT a.name, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE e.source_dag_id = 'cdc_ingest__postgres'"
        ).fetchall()
    by_table = {name: json.loads(extra) for name, extra in events}
    assert len(by_table) == len(events)
    assert set(by_table) <= {"lake.pg.inventory.customers", "lake.pg.inventory.orders", "lake.pg.inventory.all_types"}
    assert by_table["lake.pg.inventory.customers"]["batch_id"]
    with stack.service("postgres").connect("app", dbname="demo") as conn:
        source_rows = conn.execute("SELECT count(*) FROM inventory.customers").fetchone()[0]
    lake = LakeConfig.embedded(airflow_env["CDC_LAKE_DIR"])
    assert lake_row_count("lake.pg.inventory.customers", lake) == source_rows

    from pyiceberg.catalog import load_catalog
    from pyiceberg.expressions import In

    table = load_catalog(**lake.pyiceberg_properties()).load_table("pg.inventory.customers")
    landed = table.scan(row_filter=In("id", ids), selected_fields=("id",)).to_arrow().column("id").to_pylist()
    assert sorted(landed) == ids


@pytest.mark.skipif(not INGEST_JOB.is_file(), reason="jobs/ingest.py has not landed yet")
def test_iceberg_maintenance_runs_the_procedures_on_the_lake_tables(airflow_env: dict[str, str]) -> None:
    output = dags_test(airflow_env, "iceberg_maintenance", {"sources": ["postgres"]})
    assert "maintenance expire_snapshots on pg.inventory.customers" in output
    # the audit tables the ingest batches wrote to (ledger, transactions) get the append-only policy
    assert "maintenance expire_snapshots on cdc_audit.batches" in output
    assert "maintenance rewrite_position_delete_files on cdc_audit" not in output
    assert "maintenance done" in output
