"""Reconcile end to end on the local stack: live Debezium -> ingest -> reconcile, then capture -> replay -> reconcile.

The module owns everything it touches, so it never disturbs the ``postgres`` / ``mariadb`` connectors
or the demo tables others use: copies of ``customers`` / ``orders`` under unique names
(``rc_<run>_customers``, ...), connectors, topic prefixes and a PostgreSQL slot named after the run.
All of it is removed at the end (connectors stopped, offsets reset, deleted; slot, tables, topics dropped).

Run with ``CDC_KEEP_STACK=1 .venv/bin/pytest tests/integration/test_reconcile_e2e.py``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from owned_sources import OwnedSource as Source
from owned_sources import cli_ingest, create_owned_tables, owned_spec, remove_source
from pyiceberg.catalog import load_catalog
from typer.testing import CliRunner

from cdclake.capture import capture_to_file, prefix_patterns
from cdclake.cli.main import app
from cdclake.connect.client import KafkaConnectClient
from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.connect.models import ConnectorState
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.topics import topic_end_offsets, wait_for_records
from cdclake.demo.workload import run_workload
from cdclake.lake import LakeConfig
from cdclake.reconcile import ReconcileReport, lake_identifier, reconcile_source
from cdclake.stack import Stack

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

RUN = secrets.token_hex(3)
ID_BASE = 1000


@pytest.fixture(scope="module")
def sources(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Source]]:
    """Test-owned tables and connectors in both databases, after a snapshot and a mixed workload."""
    tmp = tmp_path_factory.mktemp("reconcile-specs")
    client = stack.connect_client()
    apply_demo_schema(stack)
    made = {which: owned_spec(tmp, which, f"rc_{RUN}") for which in ("postgres", "mariadb")}
    try:
        for src in made.values():
            create_owned_tables(stack, src)
            ensure_connector(client, src.spec, stack.database_endpoint(src.spec))
        for src in made.values():
            wait_running(client, src.spec.name)
        bootstrap = stack.config.kafka_bootstrap
        wait_for_records(bootstrap, dict.fromkeys((t for s in made.values() for t in s.data_topics.values()), 1))
        want: dict[str, int] = {}
        for src in made.values():
            before = topic_end_offsets(bootstrap, list(src.data_topics.values()))
            with app_sql(stack, src.which) as sql:
                events = run_workload(sql, src.customers, src.orders, ID_BASE)
            want.update({src.data_topics[t]: before[src.data_topics[t]] + n for t, n in events.items()})
        wait_for_records(bootstrap, want, timeout_s=360)  # generous: a loaded 2-core CI machine lags
        yield made
    finally:
        for src in made.values():
            remove_source(stack, client, src.which, src.spec, (src.customers, src.orders))


def _assert_equal(report: ReconcileReport, expect_rows: bool = True) -> None:
    assert [t.status for t in report.tables] == ["equal", "equal"], [t.as_dict() for t in report.tables]
    for t in report.tables:
        assert t.source_rows == t.lake_rows and t.source_checksum == t.lake_checksum
        assert t.frontier.batch_id and t.frontier.watermark
        if expect_rows:
            assert t.source_rows >= 5


def _snapshot_ids(lake: LakeConfig, sources: dict[str, Source]) -> dict[tuple[str, ...], int | None]:
    catalog = load_catalog(**lake.pyiceberg_properties())
    out = {}
    for src in sources.values():
        for table in src.spec.tables:
            ident = lake_identifier(src.spec, table)
            snap = catalog.load_table(ident).current_snapshot()
            out[ident] = snap.snapshot_id if snap else None
    return out


@pytest.fixture(scope="module")
def live_lake(sources: dict[str, Source], tmp_path_factory: pytest.TempPathFactory) -> Path:
    lake = tmp_path_factory.mktemp("reconcile-live-lake")
    for src in sources.values():
        cli_ingest(src.spec_path, lake)
    return lake


def test_live_ingest_reconciles_then_an_uncaptured_change_shows_its_key(
    stack: Stack, sources: dict[str, Source], live_lake: Path
) -> None:
    lake = LakeConfig.embedded(live_lake)
    for src in sources.values():
        report = reconcile_source(src.spec, lake=lake)
        _assert_equal(report)
        assert report.tables[1].column_types == (
            *("integer", "integer", "decimal(scale=2)", "string", "date"),
            *("timestamptz", "timestamp", "string"),  # placed_at, shipped_at, notes
        )

    # change a row while the connector is paused: the lake does not get it
    pg = sources["postgres"]
    client = stack.connect_client()
    client.pause(pg.spec.name)
    _wait_paused(client, pg.spec.name)  # pausing is asynchronous: a change made before it would stream
    orders_topic = pg.data_topics[pg.orders]
    before = topic_end_offsets(stack.config.kafka_bootstrap, [orders_topic])[orders_topic]
    try:
        with app_sql(stack, "postgres") as sql:
            assert sql.execute(f"UPDATE {pg.orders} SET status = 'lost' WHERE id = %s", [ID_BASE + 102]) == 1
        report = reconcile_source(pg.spec, lake=lake)
        customers, orders = report.tables
        assert customers.status == "equal"
        assert orders.status == "different"
        assert orders.different_keys == ((str(ID_BASE + 102),),)
        assert orders.missing_keys == orders.extra_keys == ()
        assert orders.source_rows == orders.lake_rows and orders.source_checksum != orders.lake_checksum

        result = CliRunner().invoke(
            app,
            ["reconcile", str(pg.spec_path), "--lake", str(live_lake), "--tables", pg.orders],
            env={"COLUMNS": "200"},
        )
        assert result.exit_code == 1, result.output
        assert f"rows differ (id): ({ID_BASE + 102})" in " ".join(result.output.split())
        ok = CliRunner().invoke(
            app, ["reconcile", str(pg.spec_path), "--lake", str(live_lake), "-t", pg.customers, "--json"]
        )
        assert ok.exit_code == 0, ok.output
    finally:
        client.resume(pg.spec.name)
    # once resumed, Debezium streams the change (the next test's capture includes it)
    wait_for_records(stack.config.kafka_bootstrap, {orders_topic: before + 1})


def _wait_paused(client: KafkaConnectClient, name: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.status(name)
        if status.tasks and all(t.state is ConnectorState.PAUSED for t in (status.connector, *status.tasks)):
            return
        time.sleep(0.2)
    raise AssertionError(f"connector {name} not paused after {timeout_s:.0f}s: {client.status(name)}")


def test_capture_then_replay_reconciles_and_replaying_again_changes_nothing(
    stack: Stack,
    sources: dict[str, Source],
    live_lake: Path,
    spark: SparkSession,
    spark_lake_dir: Path,
    tmp_path: Path,
) -> None:
    from cdclake.ingest.runner import replay_files

    files = {}
    for which, src in sources.items():
        files[which] = tmp_path / f"{which}.jsonl"
        ranges = capture_to_file(stack.config.kafka_bootstrap, prefix_patterns(src.spec.topic_prefix), files[which])
        assert sum(r.count for r in ranges) > 0
    lake = LakeConfig.embedded(spark_lake_dir)  # the session's lake: a second, fresh lake for these prefixes
    for which, src in sources.items():
        replay_files(spark, [files[which]], spec=str(src.spec_path))
    reports = {which: reconcile_source(src.spec, lake=lake) for which, src in sources.items()}
    for report in reports.values():
        _assert_equal(report)
    snapshots = _snapshot_ids(lake, sources)

    for which, src in sources.items():
        again = replay_files(spark, [files[which]], spec=str(src.spec_path))
        assert again.batch_id is None, again.as_dict()
    assert _snapshot_ids(lake, sources) == snapshots, "a second replay must not commit anything"
    for which, src in sources.items():
        report = reconcile_source(src.spec, lake=lake)
        _assert_equal(report)
        assert [t.lake_checksum for t in report.tables] == [t.lake_checksum for t in reports[which].tables]

    # the live lake still misses the paused change; the replayed one has it
    live = reconcile_source(
        sources["postgres"].spec, lake=LakeConfig.embedded(live_lake), tables=[sources["postgres"].orders]
    )
    assert live.tables[0].different_keys == ((str(ID_BASE + 102),),)
