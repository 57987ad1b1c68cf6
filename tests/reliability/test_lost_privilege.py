"""A connector task failing because its database user lost a privilege, on the real local stack, with Airflow.

A test-owned PostgreSQL capture runs as a capture user of its own (``rel_cap_<run>``: ``LOGIN REPLICATION``,
``SELECT`` on its two tables), with ``errors_max_retries: 1``. The user loses ``REPLICATION`` and its
connections are cut, while the demo workload writes. What the real Debezium does, pinned here: it retries the
walsender login (``must be superuser or replication role to start walsender``) with the task RUNNING, and
after its retries the task is FAILED. ``airflow dags test cdc_connectors_health`` (the specs read from a
directory holding only this capture's, ``CDC_SPEC_DIR``) restarts the task and fails, quoting the trace: the
alert; the restarted task fails again after its retries. The grant restored, the next run restarts it for good
(and fails, reporting the restart), the one after is green; the slot kept the workload's changes, and the lake
ends equal to the source.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest
from airflow_runs import airflow_test_env, run_dags_test
from owned_sources import (
    OwnedSource,
    create_owned_tables,
    ingest_until_equal,
    owned_spec_doc,
    remove_source,
    write_spec,
)
from psycopg import sql

from cdclake.connect import ConnectorStatus, KafkaConnectClient
from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.topics import wait_for_records
from cdclake.demo.workload import run_workload
from cdclake.stack import Stack
from cdclake.stack.config import password

pytestmark = [pytest.mark.reliability, pytest.mark.integration("stack")]

RUN = secrets.token_hex(3)
TAG = f"relpriv_{RUN}"
ROLE = f"rel_cap_{RUN}"
#: Debezium retries about every 10 s (retriable.restart.connector.wait.ms): one retry fails the task in about 20 s
RETRIES = 1
WALSENDER_REFUSED = "must be superuser or replication role to start walsender"


def _admin(stack: Stack):  # type: ignore[no-untyped-def]
    return stack.service("postgres").connect("admin", dbname="demo")


def _set_replication(stack: Stack, allowed: bool) -> None:
    """Give or take the capture user's REPLICATION; taking it also ends its connections (a revoked attribute does
    not end a session, a restart of the task or of the database does)."""
    with _admin(stack) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} WITH {}").format(
                sql.Identifier(ROLE), sql.SQL("REPLICATION" if allowed else "NOREPLICATION")
            )
        )
        if not allowed:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [ROLE])


@pytest.fixture(scope="module")
def capture(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnedSource]:
    """The capture, running as its own user, its spec alone in a spec directory."""
    client = stack.connect_client()
    apply_demo_schema(stack)
    spec_dir = tmp_path_factory.mktemp("lost-privilege-specs")
    customers, orders = f"inventory.{TAG}_customers", f"inventory.{TAG}_orders"
    tables = [{"name": customers, "lake": {"mode": "upsert"}}, {"name": orders, "lake": {"mode": "upsert"}}]
    path, spec = write_spec(
        spec_dir, owned_spec_doc("postgres", TAG, tables, capture_user=ROLE, errors_max_retries=RETRIES)
    )
    src = OwnedSource("postgres", path, spec, customers, orders)
    # the stack's capture password, so that the worker's env provider (CDC_POSTGRES_DEBEZIUM_PASSWORD) has it
    secret = password(stack.secrets, "postgres", "debezium")
    try:
        create_owned_tables(stack, src)
        with _admin(stack) as conn:
            role = sql.Identifier(ROLE)
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} WITH LOGIN PASSWORD {}").format(role, sql.Literal(secret)))
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE demo TO {}").format(role))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA inventory TO {}").format(role))
            conn.execute(
                sql.SQL("GRANT SELECT ON {}, {} TO {}").format(
                    sql.Identifier(*customers.split(".")), sql.Identifier(*orders.split(".")), role
                )
            )
        _set_replication(stack, True)
        ensure_connector(client, spec, stack.database_endpoint(spec))
        wait_running(client, spec.name)
        yield src
    finally:
        _set_replication(stack, True)
        remove_source(stack, client, "postgres", spec, (customers, orders))
        with _admin(stack) as conn:
            role = sql.Identifier(ROLE)
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE demo FROM {}").format(role))
            conn.execute(sql.SQL("REVOKE ALL ON SCHEMA inventory FROM {}").format(role))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))


def _wait_failed(client: KafkaConnectClient, connector: str, timeout_s: float = 180) -> ConnectorStatus:
    """The connector's status once a task is FAILED (Debezium's retries done)."""
    deadline = time.monotonic() + timeout_s
    status = client.status(connector)
    while not status.is_failed:
        assert time.monotonic() < deadline, f"the task did not fail after {RETRIES} retries: {status.describe()}"
        time.sleep(3)
        status = client.status(connector)
    return status


def test_a_capture_user_that_lost_replication_fails_the_task_the_health_dag_alerts_then_restarts_it(
    capture: OwnedSource, stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = stack.connect_client()
    lake = tmp_path_factory.mktemp("lost-privilege-lake")
    ingest_until_equal(capture, lake)
    env = airflow_test_env(
        stack,
        tmp_path_factory.mktemp("lost-privilege-airflow"),
        tmp_path_factory.mktemp("lost-privilege-airflow-lake"),
        tmp_path_factory.mktemp("lost-privilege-runs"),
    )
    env["CDC_SPEC_DIR"] = str(capture.spec_path.parent)

    _set_replication(stack, False)
    with app_sql(stack, "postgres") as sql_:
        events = run_workload(sql_, capture.customers, capture.orders, 10_000)
    assert sum(events.values()) > 0
    assert WALSENDER_REFUSED in _wait_failed(client, capture.spec.connect_name).failure_summary()

    # the alert: the health run restarts the task, which fails again, and the run fails quoting why
    connector = capture.spec.connect_name
    succeeded, output = run_dags_test(env, "cdc_connectors_health")
    assert not succeeded, output[-6000:]
    assert f"restarting the failed tasks of connector {connector}" in output, output[-6000:]
    assert WALSENDER_REFUSED in output, output[-6000:]
    # the restarted task runs while Debezium retries, then fails again: the cause lasts
    _wait_failed(client, connector)

    # the fix: the next run restarts it for good and says so (still red: it found it FAILED); the one after is green
    _set_replication(stack, True)
    succeeded, output = run_dags_test(env, "cdc_connectors_health")
    assert not succeeded, output[-6000:]
    assert f"connector {connector} is RUNNING again after its restart" in output, output[-6000:]
    assert client.status(connector).is_running
    succeeded, output = run_dags_test(env, "cdc_connectors_health")
    assert succeeded, output[-6000:]
    assert client.status(connector).is_running

    # the slot kept what was written while the task was down
    wait_for_records(stack.config.kafka_bootstrap, dict.fromkeys(capture.data_topics.values(), 1))
    ingest_until_equal(capture, lake)
