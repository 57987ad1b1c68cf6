"""Operators and sensors: execute with env-var connections and patched hook methods; deferral."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from airflow.sdk.exceptions import TaskDeferred

from cdclake import cds
from cdclake.connect import ConnectorStatus, UpsertResult
from cdclake.connectors import DatabaseEndpoint, connect_config, load_spec
from cdclake.exceptions import ConnectError, ConnectorConfigInvalidError, ConnectorFailedError, SnapshotAbortedError
from cdclake.ingest.lock import LOCK_LABEL_ENV
from cdclake_airflow.operators.debezium_signal import SendDebeziumSignalOperator
from cdclake_airflow.operators.kafka_connect import KafkaConnectorRestartOperator, KafkaConnectorUpsertOperator
from cdclake_airflow.operators.spark_job import CdcSparkJobOperator
from cdclake_airflow.sensors.debezium import SnapshotCompletedSensor
from cdclake_airflow.sensors.kafka_connect import KafkaConnectorRunningSensor
from cdclake_airflow.triggers.debezium import SnapshotNotificationTrigger
from cdclake_airflow.triggers.kafka_connect import ConnectorRunningTrigger

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
HOOK = "cdclake_airflow.hooks.kafka_connect.KafkaConnectHook"
#: the upsert operator registers through cdclake.connect.register_connector on the hook's client
CLIENT = "cdclake.connect.client.KafkaConnectClient"
VALIDATE_PATH = f"{CLIENT}.validate_or_raise"
UPSERT_PATH = f"{CLIENT}.create_or_update"
RESTART_PATH = f"{HOOK}.restart"
STATUS_PATH = f"{HOOK}.status"
SEND_SIGNAL_PATH = "cdclake_airflow.hooks.debezium_signal.DebeziumSignalHook.send"

RUNNING = ConnectorStatus.model_validate(
    {"name": "postgres", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
)
FAILED = ConnectorStatus.model_validate(
    {
        "name": "postgres",
        "connector": {"state": "RUNNING"},
        "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w1", "trace": "ConnectException: slot in use"}],
    }
)


def test_upsert_validates_then_upserts_the_generated_config() -> None:
    op = KafkaConnectorUpsertOperator(task_id="upsert", spec="postgres", spec_dir=str(SPEC_DIR))
    spec = load_spec("postgres", SPEC_DIR)
    expected = connect_config(spec, DatabaseEndpoint(host="127.0.0.1", port=5433, database="demo"))
    with (
        mock.patch(VALIDATE_PATH) as validate,
        mock.patch(UPSERT_PATH, return_value=UpsertResult(name="postgres", created=True)) as upsert,
    ):
        result = op.execute({})
    validate.assert_called_once_with(spec.connector_class, expected, "postgres")
    upsert.assert_called_once_with("postgres", expected)
    assert result == {"connector": "postgres", "created": True}


def test_upsert_stops_when_validation_fails() -> None:
    op = KafkaConnectorUpsertOperator(task_id="upsert", spec="postgres", spec_dir=str(SPEC_DIR))
    with (
        mock.patch(VALIDATE_PATH, side_effect=ConnectorConfigInvalidError("slot.name: Invalid")),
        mock.patch(UPSERT_PATH) as upsert,
        pytest.raises(ConnectorConfigInvalidError, match="slot.name"),
    ):
        op.execute({})
    upsert.assert_not_called()


def test_upsert_spec_is_templated() -> None:
    op = KafkaConnectorUpsertOperator(task_id="upsert", spec="{{ params.source }}", spec_dir=str(SPEC_DIR))
    assert "spec" in op.template_fields
    op.render_template_fields(context={"params": {"source": "mariadb"}})  # type: ignore[arg-type]
    assert op.spec == "mariadb"
    with (
        mock.patch(VALIDATE_PATH),
        mock.patch(UPSERT_PATH, return_value=UpsertResult(name="mariadb", created=False)) as upsert,
    ):
        assert op.execute({}) == {"connector": "mariadb", "created": False}
    assert upsert.call_args.args[1]["database.port"] == "3307"


def test_upsert_rejects_empty_rendered_spec() -> None:
    op = KafkaConnectorUpsertOperator(task_id="upsert", spec="{{ params.source }}")
    op.render_template_fields(context={"params": {"source": ""}})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="spec rendered empty"):
        op.execute({})


def test_restart_operator() -> None:
    op = KafkaConnectorRestartOperator(task_id="restart", connector_name="postgres", only_failed=False)
    with mock.patch(RESTART_PATH, return_value=RUNNING) as restart:
        assert op.execute({}) == "postgres connector=RUNNING tasks=[0:RUNNING]"
    restart.assert_called_once_with("postgres", include_tasks=True, only_failed=False)


def test_send_signal_operator_returns_id_for_the_sensor() -> None:
    op = SendDebeziumSignalOperator(
        task_id="snapshot",
        spec="postgres",
        spec_dir=str(SPEC_DIR),
        data_collections=["inventory.orders"],
        snapshot_type="blocking",
        additional_conditions=[
            {"data-collection": "inventory.orders", "filter": "SELECT * FROM inventory.orders WHERE id < 10"}
        ],
        signal_id="sig-42",
    )
    with mock.patch(SEND_SIGNAL_PATH, return_value=1234) as send:
        result = op.execute({})
    signal = send.call_args.args[0]
    assert (signal.id, signal.type, signal.data_collections) == ("sig-42", "execute-snapshot", ("inventory.orders",))
    # parsed in the spec's dialect (PostgreSQL) and regenerated
    assert signal.additional_conditions[0].filter == 'SELECT * FROM "inventory"."orders" WHERE "id" < 10'
    assert send.call_args.kwargs == {"channel": "source"}
    assert result == {
        "signal_id": "sig-42",
        "signal_type": "execute-snapshot",
        "snapshot_type": "blocking",
        "sent_at_ms": 1234,
        "notification_topic": "pg.notifications",
    }


def test_send_signal_operator_rejects_bad_channel() -> None:
    op = SendDebeziumSignalOperator(task_id="s", spec="postgres", signal_type="pause-snapshot", channel="jmx")
    with pytest.raises(ValueError, match="channel must be one of"):
        op.execute({})


# ---- sensors -------------------------------------------------------------------------------------


def test_running_sensor_defers() -> None:
    sensor = KafkaConnectorRunningSensor(task_id="wait", connector_name="postgres", poll_interval=3, timeout=600)
    with pytest.raises(TaskDeferred) as info:
        sensor.execute({})
    trigger = info.value.trigger
    assert isinstance(trigger, ConnectorRunningTrigger)
    assert trigger.serialize()[1] == {
        "connector_name": "postgres",
        "kafka_connect_conn_id": "kafka_connect_default",
        "poll_interval": 3,
    }
    assert info.value.method_name == "execute_complete"


def test_running_sensor_execute_complete() -> None:
    sensor = KafkaConnectorRunningSensor(task_id="wait", connector_name="postgres")
    assert sensor.execute_complete({}, {"status": "running", "state": "ok"})["status"] == "running"
    with pytest.raises(ConnectorFailedError, match="slot in use"):
        sensor.execute_complete({}, {"status": "failed", "message": "task postgres-0 FAILED:\nslot in use"})
    with pytest.raises(ConnectError, match="boom"):
        sensor.execute_complete({}, {"status": "error", "message": "boom"})


def test_running_sensor_poke_fails_fast() -> None:
    sensor = KafkaConnectorRunningSensor(task_id="wait", connector_name="postgres", deferrable=False)
    with mock.patch(STATUS_PATH, return_value=RUNNING):
        assert sensor.poke({}) is True
    with mock.patch(STATUS_PATH, return_value=FAILED), pytest.raises(ConnectorFailedError, match="slot in use"):
        sensor.poke({})


def test_snapshot_sensor_defers_with_topic_from_spec() -> None:
    sensor = SnapshotCompletedSensor(
        task_id="wait_snapshot", signal_id="sig-42", spec="postgres", spec_dir=str(SPEC_DIR), blocking_since_ms="1234"
    )
    with pytest.raises(TaskDeferred) as info:
        sensor.execute({})
    trigger = info.value.trigger
    assert isinstance(trigger, SnapshotNotificationTrigger)
    kwargs: dict[str, Any] = trigger.serialize()[1]
    assert (kwargs["topic"], kwargs["signal_id"], kwargs["blocking_since_ms"]) == ("pg.notifications", "sig-42", 1234)


def test_snapshot_sensor_execute_complete() -> None:
    sensor = SnapshotCompletedSensor(task_id="w", signal_id="s", notification_topic="pg.notifications")
    assert sensor.execute_complete({}, {"status": "completed", "signal_id": "s"})["status"] == "completed"
    with pytest.raises(SnapshotAbortedError, match="signal s was aborted"):
        sensor.execute_complete({}, {"status": "aborted", "signal_id": "s", "topic": "pg.notifications"})


def test_snapshot_sensor_needs_a_topic_source() -> None:
    with pytest.raises(ValueError, match="spec or notification_topic"):
        SnapshotCompletedSensor(task_id="w", signal_id="s")


def test_spark_job_tasks_take_the_deployments_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_SPARK_POOL", raising=False)
    assert CdcSparkJobOperator(task_id="a", job="ingest").pool == "default_pool"
    monkeypatch.setenv("CDC_SPARK_POOL", "cdc_spark")
    assert CdcSparkJobOperator(task_id="b", job="ingest").pool == "cdc_spark"
    assert CdcSparkJobOperator(task_id="c", job="ingest", pool="big").pool == "big"


def test_the_airflow_operator_maps_the_archive_unless_the_driver_runs_on_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_LAKE_DIR", str(tmp_path / "lake"))
    monkeypatch.setattr(cds, "driver_options", lambda: ["-XX:SharedArchiveFile=/x.jsa"])
    options, labels = {}, {}
    ti = SimpleNamespace(dag_id="cdc_ingest__postgres", run_id="manual__1", task_id="ingest")
    for mode in ("client", "cluster"):
        op = CdcSparkJobOperator(task_id=f"ingest_{mode}", job="ingest", summary_json=False, deploy_mode=mode)
        op._prepare({"ti": ti})
        options[mode] = op.conf["spark.driver.extraJavaOptions"]
        labels[mode] = (op.env_vars or {}).get(LOCK_LABEL_ENV)
    # the lock label names the task run to a run that waits for the source (a driver here only)
    assert labels == {"client": "airflow cdc_ingest__postgres/manual__1/ingest", "cluster": None}
    assert options["client"].endswith(" -XX:SharedArchiveFile=/x.jsa")
    assert "SharedArchiveFile" not in options["cluster"] and "-Duser.timezone=UTC" in options["cluster"]


def test_on_an_s3_lake_spark_submit_ships_icebergs_aws_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jars`` replaces ``spark.jars``: both are the session's list, which an S3 lake extends."""
    from cdclake.paths import jvm_dir

    if not any((jvm_dir() / "spark-s3").glob("*.jar")):
        pytest.skip("no spark-s3 jars: run `make cluster-jars`")
    for key, value in {
        "CDC_LAKE_KIND": "rest",
        "CDC_LAKE_URI": "http://127.0.0.1:8181",
        "CDC_LAKE_WAREHOUSE": "s3://warehouse/",
        "CDC_LAKE_S3_ENDPOINT": "http://127.0.0.1:9000",
    }.items():
        monkeypatch.setenv(key, value)
    ti = SimpleNamespace(dag_id="cdc_ingest__postgres", run_id="manual__1", task_id="ingest")
    op = CdcSparkJobOperator(task_id="ingest", job="ingest", summary_json=False)
    op._prepare({"ti": ti})
    assert op.jars == op.conf["spark.jars"]
    assert "iceberg-aws-bundle" in op.jars and "cdclake-decoder" in op.jars
