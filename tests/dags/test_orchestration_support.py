"""The pure helpers behind the DAGs (``cdclake.orchestration``, ``cdclake.assets``) and the task callables.

They live beside the DAG tests because they exist for the DAGs; none needs a service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from cdclake.assets import asset_uri, iceberg_table_asset
from cdclake.connect import ConnectorStatus
from cdclake.connectors import load_specs
from cdclake.exceptions import ConfigError
from cdclake.lake.names import catalog_identifier, spec_table_identifier, table_identifier
from cdclake.orchestration import (
    SnapshotRequest,
    connector_health_problems,
    count_mismatches,
    job_arguments,
    load_summary,
    reader_conn_id,
    run_file,
    select_specs,
    spec_names,
)

SPECS = load_specs()
PG = SPECS["postgres"]
MARIA = SPECS["mariadb"]
CALLABLES = "cdclake_airflow.callables"

SUMMARY: dict[str, Any] = {
    "batch_id": "b-1",
    "source": "postgres",
    "status": "committed",
    "tables": {
        "lake.pg.inventory.customers": {"applied": 3, "skipped": 1, "mode": "upsert", "events": {"c": 3}},
        "lake.pg.inventory.orders": {"applied": 0, "skipped": 0},
    },
    "changed_tables": ["lake.pg.inventory.customers"],
    "offsets": {"pg.inventory.customers": {"0": [10, 14]}},
    "dead_lettered": 0,
    "checks": {"ok": True, "problems": []},
}


# ---- assets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "table", "identifier", "uri"),
    [
        ("postgres", "inventory.customers", "lake.pg.inventory.customers", "iceberg://lake/pg.inventory/customers"),
        ("mariadb", "demo.orders", "lake.maria.demo.orders", "iceberg://lake/maria.demo/orders"),
        # Informix drops the database, as in its topic names
        ("informix", "demo.informix.orders", "lake.ifx.informix.orders", "iceberg://lake/ifx.informix/orders"),
    ],
)
def test_asset_names_follow_the_lake_identifiers(spec: str, table: str, identifier: str, uri: str) -> None:
    ref = iceberg_table_asset(SPECS[spec], table)
    assert (ref.name, ref.uri, ref.group) == (identifier, uri, "iceberg")
    assert ref.extra == {"source": spec, "data_collection": table, "topic": SPECS[spec].topic_for(table)}
    assert spec_table_identifier(SPECS[spec], table) == identifier
    assert asset_uri(identifier) == uri
    assert catalog_identifier(identifier) == identifier.removeprefix("lake.")


def test_asset_identifiers_match_the_ingestion_job_naming() -> None:
    from cdclake.decode.options import TableId

    for spec in SPECS.values():
        for table in spec.table_names:
            namespace, name = table.split(".")[-2:]  # Informix: owner.table of db.owner.table
            expected = table_identifier(TableId(server=spec.topic_prefix, namespace=namespace, table=name))
            assert spec_table_identifier(spec, table) == expected


def test_unknown_tables_have_no_asset() -> None:
    with pytest.raises(KeyError, match="inventory.nope"):
        spec_table_identifier(PG, "inventory.nope")
    with pytest.raises(ValueError, match="namespaced"):
        asset_uri("lake.t")


# ---- selection and job arguments -------------------------------------------------------------------


def test_select_specs_defaults_to_the_configured_ones() -> None:
    specs = list(SPECS.values())
    selected, skipped = select_specs(specs, [], lambda s: s.name in {"postgres", "mariadb"})
    assert [s.name for s in selected] == ["mariadb", "postgres"]
    assert {s.name for s in skipped} == {"informix", "mongodb", "mysql"}
    assert spec_names(SPECS) == spec_names(specs) == ["informix", "mariadb", "mongodb", "mysql", "postgres"]


def test_select_specs_rejects_unknown_or_unconfigured_requests() -> None:
    specs = list(SPECS.values())
    with pytest.raises(ValueError, match="unknown connector spec\\(s\\) oracle"):
        select_specs(specs, ["oracle"], lambda s: True)
    with pytest.raises(ValueError, match="AIRFLOW_CONN_CDC_MYSQL"):
        select_specs(specs, ["mysql"], lambda s: False)


def test_job_arguments_and_run_files() -> None:
    assert job_arguments("postgres") == ["--spec", "postgres"]
    assert job_arguments(
        "postgres", summary_json="/r/s.json", max_records=10, extra={"dry_run": True, "retain_last": 3, "x": None}
    ) == ["--spec", "postgres", "--max-records", "10", "--dry-run", "--retain-last", "3", "--summary-json", "/r/s.json"]
    path = run_file(Path("/runs"), "cdc_ingest__postgres", "scheduled__2026-11-21T06:00:00+00:00", "ingest")
    assert path == Path("/runs/cdc_ingest__postgres/scheduled__2026-11-21T06_00_00_00_00/ingest.json")
    assert run_file(Path("/r"), "d", "r", "t", map_index=2).name == "t.2.json"


# ---- ingest summary --------------------------------------------------------------------------------


def test_summary_parses_and_reports_changes() -> None:
    summary = load_summary(SUMMARY)
    assert summary.changed("lake.pg.inventory.customers") and not summary.changed("lake.pg.inventory.orders")
    assert summary.problems() == [] and summary.warnings() == []
    assert summary.event_extra("lake.pg.inventory.customers") == {
        "batch_id": "b-1",
        "source": "postgres",
        "table": {"applied": 3, "skipped": 1, "dead_lettered": 0, "mode": "upsert", "events": {"c": 3}},
        "offsets": {"pg.inventory.customers": {"0": [10, 14]}},
    }


def test_summary_problems_and_invalid_files(tmp_path: Path) -> None:
    bad = {**SUMMARY, "checks": {"ok": False, "problems": ["offsets not contiguous"]}, "dead_lettered": 2}
    summary = load_summary(bad)
    assert summary.problems() == ["offsets not contiguous"]
    assert summary.warnings() == ["batch b-1: 2 record(s) dead-lettered"]
    assert load_summary({**bad, "checks": {"ok": False}}).problems() == [
        "checks.ok is false (the job reported no problem text)"
    ]
    with pytest.raises(ConfigError, match="not a valid ingest summary"):
        load_summary({"source": "postgres"})  # no checks
    with pytest.raises(ConfigError, match="cannot read"):
        load_summary(tmp_path / "missing.json")
    path = tmp_path / "s.json"
    path.write_text('{"source": "pg", "batch_id": null, "checks": {"ok": true}}')
    assert load_summary(path).batch_id is None


# ---- snapshot requests and counts ------------------------------------------------------------------


def test_snapshot_request_resolves_tables_and_filters() -> None:
    request = SnapshotRequest(PG, ["customers", "inventory.orders"], "incremental", " region = 'EU' ")
    assert request.signal_fields() == {
        "spec": "postgres",
        "data_collections": ["inventory.customers", "inventory.orders"],
        "snapshot_type": "incremental",
        "additional_conditions": [
            {"data-collection": "inventory.customers", "filter": "\"region\" = 'EU'"},
            {"data-collection": "inventory.orders", "filter": "\"region\" = 'EU'"},
        ],
    }
    assert SnapshotRequest(PG, ["inventory.customers"], "BLOCKING", "").additional_conditions == []
    blocking = SnapshotRequest(MARIA, ["orders"], "blocking", "select * from demo.orders where id < 5")
    assert blocking.filters == {"demo.orders": "SELECT * FROM `demo`.`orders` WHERE `id` < 5"}
    # MongoDB filters are not SQL: sent as given
    mongo = SnapshotRequest(SPECS["mongodb"], ["orders"], "incremental", '{"status": "open"}')
    assert mongo.additional_conditions == [{"data-collection": "demo.orders", "filter": '{"status": "open"}'}]


@pytest.mark.parametrize(
    ("tables", "kind", "filter_", "message"),
    [
        (["inventory.nope"], "incremental", None, "does not capture 'inventory.nope'; its tables are"),
        ([], "incremental", None, "non-empty list"),
        (["inventory.customers"], "full", None, "type must be one of incremental, blocking"),
        (["customers", "orders"], "blocking", "SELECT * FROM x", "exactly one table"),
        (["orders"], "incremental", "id IN (SELECT usesysid FROM pg_shadow)", "orders: subqueries are not allowed"),
        (["orders"], "blocking", "SELECT * FROM inventory.customers", "must select FROM inventory.orders"),
    ],
)
def test_snapshot_request_rejects(tables: list[str], kind: str, filter_: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SnapshotRequest(PG, tables, kind, filter_)


def test_reader_connection_and_count_mismatches() -> None:
    # the row count queries per dialect: tests/unit/databases/test_source_catalog.py
    assert reader_conn_id(PG) == "cdc_postgres_reader"
    assert count_mismatches({"a": (3, 3), "b": (3, 2)}) == ["b: source 3 row(s), lake 2 row(s)"]


# ---- connector health ------------------------------------------------------------------------------

RUNNING = ConnectorStatus.model_validate(
    {"name": "postgres", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
)
FAILED = ConnectorStatus.model_validate(
    {
        "name": "mariadb",
        "connector": {"state": "RUNNING", "worker_id": "w:8083"},
        "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": "java.sql.SQLException: boom"}],
    }
)
RESTARTING_MARIADB = ConnectorStatus.model_validate(
    {"name": "mariadb", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RESTARTING"}]}
)
PAUSED = ConnectorStatus.model_validate(
    {"name": "mysql", "connector": {"state": "PAUSED"}, "tasks": [{"id": 0, "state": "PAUSED"}]}
)


def test_health_problems_quote_traces_and_name_missing_connectors() -> None:
    failures, warnings = connector_health_problems(
        {"postgres": "postgres", "mariadb": "mariadb", "mysql": "mysql", "mongodb": "mongodb"},
        {"postgres": RUNNING, "mariadb": FAILED, "mysql": PAUSED},
    )
    assert failures == [
        "task mariadb-0 FAILED on w:8083:\njava.sql.SQLException: boom",
        "connector mongodb (spec mongodb) is not registered; run the cdc_connectors DAG",
    ]
    assert warnings == ["connector mysql connector=PAUSED tasks=[0:PAUSED] (spec mysql) is not RUNNING"]


# ---- task callables (Airflow adapters) -------------------------------------------------------------


def test_health_check_restarts_a_failed_connector_and_fails_while_it_fails_again() -> None:
    """The cause still there: the restart fails again and the run fails with the trace (the alert), without a task
    retry (which would find the restarted task RUNNING through Debezium's retries)."""
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow import callables

    statuses = {"postgres": RUNNING, "mariadb": FAILED}
    sleeps: list[float] = []
    with (
        mock.patch(f"{CALLABLES}.connection_defined", side_effect=lambda c: c in {"cdc_postgres", "cdc_mariadb"}),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.list_connectors", return_value=dict(statuses)),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.restart") as restart,
        mock.patch(f"{CALLABLES}.KafkaConnectHook.status", side_effect=[RESTARTING_MARIADB, FAILED]) as status,
    ):
        with pytest.raises(AirflowFailException, match="SQLException: boom"):
            callables.check_connectors_health(None, "kafka_connect_default", sleep=sleeps.append)
    restart.assert_called_once_with("mariadb", include_tasks=True, only_failed=True)
    assert status.call_count == 2 and sleeps == [2.0]


def test_health_check_does_not_take_the_failure_it_restarts_for_a_new_one() -> None:
    """Connect restarts tasks asynchronously: the first status after the restart may still be the old FAILED."""
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow import callables

    running = RUNNING.model_copy(update={"name": "mariadb"})
    with (
        mock.patch(f"{CALLABLES}.connection_defined", side_effect=lambda c: c in {"cdc_postgres", "cdc_mariadb"}),
        mock.patch(
            f"{CALLABLES}.KafkaConnectHook.list_connectors", return_value={"postgres": RUNNING, "mariadb": FAILED}
        ),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.restart"),
        mock.patch(
            f"{CALLABLES}.KafkaConnectHook.status", side_effect=[FAILED, RESTARTING_MARIADB] + [running] * 10
        ) as status,
    ):
        with pytest.raises(AirflowFailException, match="restarted and it has been RUNNING"):
            callables.check_connectors_health(None, "kafka_connect_default", settle_s=4.0, sleep=lambda s: None)
    assert status.call_count > 2


def test_health_check_restarts_a_failed_connector_and_reports_it_then_is_green() -> None:
    """A restart that holds still fails the run (the task may be RUNNING through Debezium's retries of a lasting
    fault), saying it was restarted and quoting the trace; the next run, nothing FAILED, is green."""
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow import callables

    running = RUNNING.model_copy(update={"name": "mariadb"})
    with (
        mock.patch(f"{CALLABLES}.connection_defined", side_effect=lambda c: c in {"cdc_postgres", "cdc_mariadb"}),
        mock.patch(
            f"{CALLABLES}.KafkaConnectHook.list_connectors", return_value={"postgres": RUNNING, "mariadb": FAILED}
        ),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.restart") as restart,
        mock.patch(f"{CALLABLES}.KafkaConnectHook.status", return_value=running),
    ):
        with pytest.raises(AirflowFailException, match=r"(?s)connector mariadb was FAILED.*SQLException: boom"):
            callables.check_connectors_health(None, "kafka_connect_default", settle_s=4.0, sleep=lambda s: None)
    restart.assert_called_once_with("mariadb", include_tasks=True, only_failed=True)
    # nothing failed: nothing restarted, green
    with (
        mock.patch(f"{CALLABLES}.connection_defined", side_effect=lambda c: c in {"cdc_postgres", "cdc_mariadb"}),
        mock.patch(
            f"{CALLABLES}.KafkaConnectHook.list_connectors", return_value={"postgres": RUNNING, "mariadb": running}
        ),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.restart") as restart,
    ):
        result = callables.check_connectors_health(None, "kafka_connect_default")
    restart.assert_not_called()
    assert result == {
        "mariadb": "mariadb connector=RUNNING tasks=[0:RUNNING]",
        "postgres": "postgres connector=RUNNING tasks=[0:RUNNING]",
    }


def test_failed_batch_checks_fail_the_task_without_retries() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow.callables import check_ingest_result

    assert check_ingest_result({"summary": SUMMARY})["batch_id"] == "b-1"
    bad = {**SUMMARY, "checks": {"ok": False, "problems": ["count mismatch in lake.pg.inventory.orders"]}}
    with pytest.raises(AirflowFailException, match="count mismatch in lake.pg.inventory.orders"):
        check_ingest_result({"summary": bad})
    with pytest.raises(AirflowFailException, match="returned no summary"):
        check_ingest_result(None)


def test_dead_letters_fail_the_run_naming_each_topic_and_reason() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow.callables import check_dead_letters, check_ingest_result

    assert check_dead_letters(SUMMARY) == {}
    dead = {
        **SUMMARY,
        "dead_lettered": 6,
        "dead_letters": {"pg.inventory.customers": {"invalid_json": 1}, "pg.inventory.orders": {"no_schema": 5}},
    }
    # the batch's own checks pass: check_batch returns it, the publish tasks emit its events
    assert check_ingest_result({"summary": dead})["dead_letters"] == dead["dead_letters"]
    with pytest.raises(AirflowFailException) as failed:
        check_dead_letters(dead)
    assert str(failed.value).splitlines() == [
        "batch b-1 of postgres committed, but 6 record(s) could not be decoded and went to "
        "lake.cdc_audit.dead_letters instead of their tables:",
        "pg.inventory.customers: 1 record(s), reason invalid_json",
        "pg.inventory.orders: 5 record(s), reason no_schema",
        "See the records in this DAG's CDC source tab (dead letters) or at "
        "/cdclake/sources/postgres/dead-letters?batch_id=b-1; the reasons are explained in docs/decoding.md "
        "(Dead-letter reasons). Once their cause is fixed (connector, spec or source), later batches decode such "
        "records; these stay in the dead-letter table.",
    ]
    # a summary written before the breakdown existed: its total
    with pytest.raises(AirflowFailException, match=r"3 record\(s\), reasons not in the summary"):
        check_dead_letters({**SUMMARY, "dead_lettered": 3})


def test_publish_emits_an_event_only_for_changed_tables() -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from cdclake_airflow.assets import spec_assets
    from cdclake_airflow.callables import publish_table_change

    assets = spec_assets(PG)
    events: dict[Any, Any] = {asset: mock.Mock(extra={}) for asset in assets.values()}
    extra = publish_table_change(SUMMARY, assets["inventory.customers"], events)
    assert events[assets["inventory.customers"]].extra == extra and extra["batch_id"] == "b-1"
    with pytest.raises(AirflowSkipException, match="did not change lake.pg.inventory.orders"):
        publish_table_change(SUMMARY, assets["inventory.orders"], events)


def test_snapshot_count_comparison_is_skipped_without_a_reader_connection() -> None:
    from cdclake_airflow.callables import compare_snapshot_counts

    with mock.patch(f"{CALLABLES}.connection_defined", return_value=False):
        assert compare_snapshot_counts("postgres", ["inventory.customers"], {"summary": SUMMARY}) == {
            "compared": {},
            "skipped": ["inventory.customers"],
        }


def test_snapshot_count_comparison_fails_on_a_difference() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow.callables import compare_snapshot_counts

    with (
        mock.patch(f"{CALLABLES}.source_row_counts", return_value={"inventory.customers": 5}),
        mock.patch(f"{CALLABLES}.lake_row_count", return_value=4),
    ):
        with pytest.raises(AirflowFailException, match="inventory.customers: source 5 row\\(s\\), lake 4 row\\(s\\)"):
            compare_snapshot_counts("postgres", ["inventory.customers"], {"summary": SUMMARY})
    with (
        mock.patch(f"{CALLABLES}.source_row_counts", return_value={"inventory.customers": 4}),
        mock.patch(f"{CALLABLES}.lake_row_count", return_value=4),
    ):
        result = compare_snapshot_counts("postgres", ["inventory.customers"], None)
    assert result == {"compared": {"inventory.customers": [4, 4]}, "skipped": []}


def test_invalid_snapshot_requests_fail_without_retries() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from cdclake_airflow.callables import plan_snapshot

    params = {"source": "mariadb", "tables": ["orders"], "type": "incremental", "filter": None}
    assert plan_snapshot(params)["data_collections"] == ["demo.orders"]
    with pytest.raises(AirflowFailException, match="does not capture 'inventory.orders'"):
        plan_snapshot({**params, "tables": ["inventory.orders"]})


def test_health_check_is_skipped_when_no_source_connection_is_defined() -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from cdclake_airflow import callables

    with (
        mock.patch(f"{CALLABLES}.connection_defined", return_value=False),
        mock.patch(f"{CALLABLES}.KafkaConnectHook.list_connectors") as connect,
    ):
        with pytest.raises(AirflowSkipException, match="nothing to check"):
            callables.check_connectors_health(None, "kafka_connect_default")
    connect.assert_not_called()  # no Kafka Connect connection needed either


def test_a_run_that_found_the_source_busy_is_skipped_with_the_holder() -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from cdclake.ingest.runner import busy_summary
    from cdclake_airflow.callables import check_ingest_result

    busy = busy_summary("postgres", "source postgres is being ingested by airflow cdc_snapshot/run-1/ingest")
    with pytest.raises(AirflowSkipException, match="being ingested by airflow cdc_snapshot/run-1/ingest"):
        check_ingest_result({"summary": busy})


def test_the_pending_check_asks_kafka_and_the_ledger() -> None:
    from cdclake.monitor import PartitionLag, PendingWork
    from cdclake_airflow.callables import ingest_pending

    with (
        mock.patch(f"{CALLABLES}.connection_defined", return_value=False),
        mock.patch("cdclake.monitor.pending_work", return_value=PendingWork()) as pending,
    ):
        assert ingest_pending("postgres") is False
    assert pending.call_args.kwargs["bootstrap"] == PG.kafka_bootstrap_servers
    work = PendingWork(lag=[PartitionLag("pg.inventory.orders", 0, 5, 3)])
    with (
        mock.patch(f"{CALLABLES}.connection_defined", return_value=False),
        mock.patch("cdclake.monitor.pending_work", return_value=work),
    ):
        assert ingest_pending("postgres") is True
