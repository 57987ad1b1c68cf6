"""KafkaConnectClient against a fake Connect REST API (requests-mock): success paths, typed errors, retries."""

from __future__ import annotations

import logging

import pytest
import requests
import requests_mock as rm
from connect_helpers import URL

from cdclake.connect import ConnectorState, KafkaConnectClient, mask_config
from cdclake.exceptions import (
    ConnectAuthenticationError,
    ConnectBadRequestError,
    ConnectError,
    ConnectorConfigInvalidError,
    ConnectorNotFoundError,
    ConnectRebalanceInProgressError,
    ConnectServerError,
    ConnectTimeoutError,
    ConnectUnavailableError,
)

PG_CLASS = "io.debezium.connector.postgresql.PostgresConnector"

STATUS_RUNNING = {
    "name": "postgres",
    "connector": {"state": "RUNNING", "worker_id": "127.0.0.1:8083"},
    "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "127.0.0.1:8083"}],
    "type": "source",
}
STATUS_TASK_FAILED = {
    "name": "postgres",
    "connector": {"state": "RUNNING", "worker_id": "127.0.0.1:8083"},
    "tasks": [
        {
            "id": 0,
            "state": "FAILED",
            "worker_id": "127.0.0.1:8083",
            "trace": "org.apache.kafka.connect.errors.ConnectException: replication slot is active\n\tat ...",
        }
    ],
    "type": "source",
}


# ---- success paths -----------------------------------------------------------------------------


def test_list_plugins(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(
        f"{URL}/connector-plugins?connectorsOnly=true",
        json=[{"class": PG_CLASS, "type": "source", "version": "3.5.0.Final"}],
    )
    plugins = client.list_plugins()
    assert [(p.class_name, p.type, p.version) for p in plugins] == [(PG_CLASS, "source", "3.5.0.Final")]
    assert rest_mock.last_request.qs == {"connectorsonly": ["true"]}


def test_validate_ok_and_errors(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    body = {
        "name": PG_CLASS,
        "error_count": 2,
        "groups": ["Common"],
        "configs": [
            {"definition": {"name": "topic.prefix"}, "value": {"name": "topic.prefix", "value": "pg", "errors": []}},
            {
                "definition": {"name": "database.hostname"},
                "value": {"name": "database.hostname", "value": None, "errors": ["Missing required configuration"]},
            },
            {
                "definition": {"name": "slot.name"},
                "value": {"name": "slot.name", "value": "x-y", "errors": ["Invalid slot name"]},
            },
        ],
    }
    rest_mock.put(f"{URL}/connector-plugins/{PG_CLASS}/config/validate", json=body)

    result = client.validate(PG_CLASS, {"topic.prefix": "pg"})

    assert rest_mock.last_request.json() == {"topic.prefix": "pg", "connector.class": PG_CLASS}
    assert not result.ok
    assert result.error_count == 2
    assert result.error_lines() == ["database.hostname: Missing required configuration", "slot.name: Invalid slot name"]
    with pytest.raises(ConnectorConfigInvalidError) as info:
        result.raise_for_errors("postgres")
    assert str(info.value) == (
        "Kafka Connect rejected the config of connector postgres (2 error(s)):\n"
        "database.hostname: Missing required configuration\nslot.name: Invalid slot name"
    )


def test_validate_or_raise_passes_when_clean(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.put(f"{URL}/connector-plugins/{PG_CLASS}/config/validate", json={"name": PG_CLASS, "error_count": 0})
    client.validate_or_raise(PG_CLASS, {"a": "b"})


@pytest.mark.parametrize(("status", "created"), [(201, True), (200, False)])
def test_create_or_update(client: KafkaConnectClient, rest_mock: rm.Mocker, status: int, created: bool) -> None:
    rest_mock.put(
        f"{URL}/connectors/postgres/config",
        status_code=status,
        json={"name": "postgres", "config": {"topic.prefix": "pg", "name": "postgres"}, "tasks": [], "type": "source"},
    )
    result = client.create_or_update("postgres", {"topic.prefix": "pg"})
    assert (result.name, result.created) == ("postgres", created)
    assert result.config == {"topic.prefix": "pg", "name": "postgres"}
    assert rest_mock.last_request.json() == {"topic.prefix": "pg"}


def test_create_or_update_never_logs_secrets(
    client: KafkaConnectClient, rest_mock: rm.Mocker, caplog: pytest.LogCaptureFixture
) -> None:
    rest_mock.put(f"{URL}/connectors/m/config", status_code=201, json={"name": "m", "config": {}})
    caplog.set_level(logging.INFO, logger="cdclake.connect.client")
    client.create_or_update(
        "m",
        {
            "database.password": "${env:CDC_X_PASSWORD}",
            "schema.history.internal.producer.ssl.key.password": "s3cr3t",
            "mongodb.connection.string": "mongodb://u:pw@h/",
        },
    )
    text = caplog.text
    assert "s3cr3t" not in text
    assert "u:pw" not in text
    assert "${env:CDC_X_PASSWORD}" in text  # a reference is not a secret


def test_get_config_status_and_offsets(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/postgres/config", json={"tasks.max": "1"})
    rest_mock.get(f"{URL}/connectors/postgres/status", json=STATUS_TASK_FAILED)
    rest_mock.get(
        f"{URL}/connectors/postgres/offsets",
        json={"offsets": [{"partition": {"server": "pg"}, "offset": {"lsn": 123, "txId": 7}}]},
    )
    assert client.get_config("postgres") == {"tasks.max": "1"}
    status = client.status("postgres")
    assert status.connector.state is ConnectorState.RUNNING
    assert status.is_failed and not status.is_running
    assert status.failed_tasks[0].id == 0
    assert "replication slot is active" in status.failure_summary()
    assert status.describe() == "postgres connector=RUNNING tasks=[0:FAILED]"
    offsets = client.offsets("postgres")
    assert offsets[0].partition == {"server": "pg"}
    assert offsets[0].offset == {"lsn": 123, "txId": 7}


def test_restart_variants(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.post(f"{URL}/connectors/postgres/restart", status_code=202, json=STATUS_RUNNING)
    status = client.restart("postgres")
    assert status is not None and status.is_running
    assert rest_mock.last_request.qs == {"includetasks": ["true"], "onlyfailed": ["true"]}
    rest_mock.post(f"{URL}/connectors/postgres/restart", status_code=204)
    assert client.restart("postgres", include_tasks=False, only_failed=False) is None
    assert rest_mock.last_request.qs == {"includetasks": ["false"], "onlyfailed": ["false"]}


def test_lifecycle_calls(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.post(f"{URL}/connectors/postgres/tasks/0/restart", status_code=204)
    rest_mock.put(f"{URL}/connectors/postgres/pause", status_code=202)
    rest_mock.put(f"{URL}/connectors/postgres/resume", status_code=202)
    rest_mock.put(f"{URL}/connectors/postgres/stop", status_code=204)
    rest_mock.delete(f"{URL}/connectors/postgres", status_code=204)
    client.restart_task("postgres", 0)
    client.pause("postgres")
    client.resume("postgres")
    client.stop("postgres")
    client.delete("postgres")
    assert [(r.method, r.path) for r in rest_mock.request_history] == [
        ("POST", "/connectors/postgres/tasks/0/restart"),
        ("PUT", "/connectors/postgres/pause"),
        ("PUT", "/connectors/postgres/resume"),
        ("PUT", "/connectors/postgres/stop"),
        ("DELETE", "/connectors/postgres"),
    ]


def test_list_connectors_plain_and_expanded(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors", json=["postgres", "mariadb"])
    assert client.list_connectors() == ["postgres", "mariadb"]
    rest_mock.get(f"{URL}/connectors?expand=status", json={"postgres": {"status": STATUS_RUNNING}})
    expanded = client.list_connectors(expand_status=True)
    assert expanded["postgres"].is_running


def test_exists(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/postgres", json={"name": "postgres"})
    rest_mock.get(
        f"{URL}/connectors/nope", status_code=404, json={"error_code": 404, "message": "Connector nope not found"}
    )
    assert client.exists("postgres")
    assert not client.exists("nope")


def test_connector_names_are_url_quoted(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/a%2Fb/status", json=STATUS_RUNNING)
    client.status("a/b")


def test_basic_auth_is_sent(rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors", json=[])
    KafkaConnectClient(URL, auth=("admin", "pw")).list_connectors()
    assert rest_mock.last_request.headers["Authorization"].startswith("Basic ")


def test_timeout_is_passed_on_every_call(rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors", json=[])
    KafkaConnectClient(URL, timeout=(1.5, 7.0)).list_connectors()
    assert rest_mock.last_request.timeout == (1.5, 7.0)


# ---- errors --------------------------------------------------------------------------------------

ERROR_CASES = [
    (400, ConnectBadRequestError, "Connector configuration is invalid and contains the following 1 error(s)"),
    (401, ConnectAuthenticationError, "Unauthorized"),
    (404, ConnectorNotFoundError, "Connector postgres not found"),
    (409, ConnectRebalanceInProgressError, "Cannot complete request momentarily due to stale configuration"),
    (500, ConnectServerError, "Request timed out"),
    (503, ConnectServerError, "Service Unavailable"),
]


@pytest.mark.parametrize(("status", "error", "message"), ERROR_CASES, ids=[str(c[0]) for c in ERROR_CASES])
def test_http_errors_are_typed_and_quote_connect(
    client: KafkaConnectClient, rest_mock: rm.Mocker, status: int, error: type[ConnectError], message: str
) -> None:
    rest_mock.get(
        f"{URL}/connectors/postgres/status", status_code=status, json={"error_code": status, "message": message}
    )
    with pytest.raises(error) as info:
        client.status("postgres")
    assert message in str(info.value)
    assert f"HTTP {status}" in str(info.value)
    assert info.value.status == status
    assert isinstance(info.value.__cause__, requests.HTTPError)


def test_non_json_error_body_is_quoted(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors", status_code=502, text="<html>Bad Gateway</html>")
    with pytest.raises(ConnectServerError, match="Bad Gateway"):
        client.list_connectors()


def test_retryable_errors_retry_with_capped_backoff(
    client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]
) -> None:
    rest_mock.get(
        f"{URL}/connectors/postgres/status",
        [
            {"status_code": 409, "json": {"error_code": 409, "message": "rebalance in progress"}},
            {"exc": requests.exceptions.ConnectionError("refused")},
            {"status_code": 500, "json": {"error_code": 500, "message": "boom"}},
            {"status_code": 200, "json": STATUS_RUNNING},
        ],
    )
    assert client.status("postgres").is_running
    assert rest_mock.call_count == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_retries_exhausted_raise_last_error(
    client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]
) -> None:
    rest_mock.put(
        f"{URL}/connectors/postgres/config", status_code=409, json={"error_code": 409, "message": "rebalance"}
    )
    with pytest.raises(ConnectRebalanceInProgressError, match="rebalance"):
        client.create_or_update("postgres", {})
    assert rest_mock.call_count == 4
    assert sleeps == [0.5, 1.0, 2.0]


def test_client_errors_are_not_retried(client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]) -> None:
    rest_mock.get(f"{URL}/connectors/x/status", status_code=404, json={"error_code": 404, "message": "no x"})
    with pytest.raises(ConnectorNotFoundError):
        client.status("x")
    assert rest_mock.call_count == 1
    assert sleeps == []


def test_connection_refused_names_the_url(rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors", exc=requests.exceptions.ConnectionError("Connection refused"))
    client = KafkaConnectClient(URL, retries=0)
    with pytest.raises(ConnectUnavailableError, match=f"Kafka Connect at {URL} is unreachable") as info:
        client.list_connectors()
    assert isinstance(info.value.__cause__, requests.exceptions.ConnectionError)
    assert isinstance(info.value, ConnectionError)


def test_timeout_raised_after_retries(rest_mock: rm.Mocker, sleeps: list[float]) -> None:
    rest_mock.get(f"{URL}/connectors", exc=requests.exceptions.ReadTimeout("read timed out"))
    client = KafkaConnectClient(URL, retries=1, timeout=2.0, sleep=sleeps.append)
    with pytest.raises(ConnectTimeoutError, match="timed out") as info:
        client.list_connectors()
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value.__cause__, requests.exceptions.ReadTimeout)
    assert rest_mock.call_count == 2
    assert sleeps == [0.5]


def test_real_connection_refused_against_closed_port() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = KafkaConnectClient(f"http://127.0.0.1:{port}", retries=0, timeout=(0.5, 0.5))
    with pytest.raises(ConnectUnavailableError, match=f"127.0.0.1:{port}"):
        client.list_connectors()


@pytest.mark.parametrize("bad", [{"base_url": "connect:8083"}, {"base_url": URL, "retries": -1}])
def test_constructor_validation(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KafkaConnectClient(**bad)  # type: ignore[arg-type]


def test_retries_are_capped() -> None:
    assert KafkaConnectClient(URL, retries=1000).retries == 10


def test_mask_config() -> None:
    assert mask_config(
        {
            "database.password": "literal",
            "database.user": "debezium",
            "signal.consumer.sasl.jaas.config": "x",
            "api.token": "${file:/s:token}",
        }
    ) == {
        "database.password": "***",
        "database.user": "debezium",
        "signal.consumer.sasl.jaas.config": "***",
        "api.token": "${file:/s:token}",
    }
