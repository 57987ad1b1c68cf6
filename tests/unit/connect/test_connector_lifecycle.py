"""register_connector / ensure_connector against a fake Connect REST API (requests-mock)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests_mock as rm
from connect_helpers import URL

from cdclake.connect import KafkaConnectClient, ensure_connector, register_connector
from cdclake.connect.lifecycle import wait_running
from cdclake.connectors import ConnectorSpec, DatabaseEndpoint, connect_config, load_spec
from cdclake.exceptions import ConnectorConfigInvalidError

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
ENDPOINT = DatabaseEndpoint(host="127.0.0.1", port=5433, database="demo")


@pytest.fixture
def spec() -> ConnectorSpec:
    """The postgres spec, registered under a connector name of its own (``connect_name`` != ``name``)."""
    return load_spec("postgres", SPEC_DIR).model_copy(update={"connector_name": "pg-cdc"})


def _validate_url(spec: ConnectorSpec) -> str:
    return f"{URL}/connector-plugins/{spec.connector_class}/config/validate"


def test_register_validates_the_generated_config_then_upserts_it_under_connect_name(
    client: KafkaConnectClient, rest_mock: rm.Mocker, spec: ConnectorSpec
) -> None:
    expected = connect_config(spec, ENDPOINT)
    validate = rest_mock.put(_validate_url(spec), json={"name": spec.connector_class, "error_count": 0})
    upsert = rest_mock.put(f"{URL}/connectors/pg-cdc/config", status_code=201, json={"name": "pg-cdc", "config": {}})
    result = register_connector(client, spec, ENDPOINT)
    assert (result.name, result.created) == ("pg-cdc", True)
    # Connect's validate endpoint needs the name; the upsert takes it from the URL
    assert validate.last_request.json() == {**expected, "name": "pg-cdc"}
    assert upsert.last_request.json() == expected
    assert [r.url.split("/", 3)[3] for r in rest_mock.request_history] == [
        f"connector-plugins/{spec.connector_class}/config/validate",
        "connectors/pg-cdc/config",
    ]


def test_register_stops_when_validation_fails(
    client: KafkaConnectClient, rest_mock: rm.Mocker, spec: ConnectorSpec
) -> None:
    rest_mock.put(
        _validate_url(spec),
        json={
            "name": spec.connector_class,
            "error_count": 1,
            "configs": [{"value": {"name": "slot.name", "errors": ["Invalid slot name"]}}],
        },
    )
    upsert = rest_mock.put(f"{URL}/connectors/pg-cdc/config", json={})
    with pytest.raises(ConnectorConfigInvalidError, match="connector pg-cdc"):
        register_connector(client, spec, ENDPOINT)
    assert not upsert.called


def test_register_without_validation_only_upserts(
    client: KafkaConnectClient, rest_mock: rm.Mocker, spec: ConnectorSpec
) -> None:
    upsert = rest_mock.put(f"{URL}/connectors/pg-cdc/config", status_code=200, json={"name": "pg-cdc"})
    assert register_connector(client, spec, ENDPOINT, validate=False).created is False
    assert rest_mock.call_count == 1 and upsert.called


def test_ensure_registers_an_absent_connector_and_leaves_a_running_one(
    client: KafkaConnectClient, rest_mock: rm.Mocker, spec: ConnectorSpec
) -> None:
    rest_mock.get(f"{URL}/connectors/pg-cdc", status_code=404, json={"error_code": 404, "message": "not found"})
    rest_mock.put(_validate_url(spec), json={"name": spec.connector_class, "error_count": 0})
    upsert = rest_mock.put(f"{URL}/connectors/pg-cdc/config", status_code=201, json={"name": "pg-cdc"})
    assert ensure_connector(client, spec, ENDPOINT) == "registered"
    assert upsert.call_count == 1

    rest_mock.get(f"{URL}/connectors/pg-cdc", json={"name": "pg-cdc"})
    rest_mock.get(
        f"{URL}/connectors/pg-cdc/status",
        json={"name": "pg-cdc", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]},
    )
    assert ensure_connector(client, spec, ENDPOINT) == "running"
    assert upsert.call_count == 1


def test_wait_running_waits_through_the_status_a_new_connector_does_not_have_yet(
    client: KafkaConnectClient, rest_mock: rm.Mocker
) -> None:
    """Connect stores a new connector's config before its status: GET .../status answers 404 in between."""
    running = {"name": "pg-cdc", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
    status = rest_mock.get(
        f"{URL}/connectors/pg-cdc/status",
        [
            {"status_code": 404, "json": {"error_code": 404, "message": "No status found for connector pg-cdc"}},
            {"status_code": 200, "json": {**running, "tasks": []}},
            {"status_code": 200, "json": running},
        ],
    )
    waits: list[float] = []
    wait_running(client, "pg-cdc", timeout_s=60, sleep=waits.append)
    assert status.call_count == 3 and waits == [1.0, 1.0]


def test_wait_running_fails_with_the_trace_of_a_failed_task(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    from cdclake.exceptions import ConnectorFailedError

    failed = {
        "name": "pg-cdc",
        "connector": {"state": "RUNNING", "worker_id": "w:8083"},
        "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w:8083", "trace": "PSQLException: permission denied"}],
    }
    rest_mock.get(f"{URL}/connectors/pg-cdc/status", json=failed)
    with pytest.raises(ConnectorFailedError, match="permission denied"):
        wait_running(client, "pg-cdc", timeout_s=60, sleep=lambda s: None)
