"""KafkaConnectClient.remove / reset_offsets against a fake Connect REST API (requests-mock)."""

from __future__ import annotations

from typing import Any

import pytest
import requests_mock as rm
from connect_helpers import URL

from cdclake.connect import KafkaConnectClient
from cdclake.exceptions import ConnectBadRequestError, ConnectorNotFoundError, ConnectTimeoutError

NAME = "capture-pg"

NOT_FOUND = {"status_code": 404, "json": {"error_code": 404, "message": f"Connector {NAME} not found"}}
NOT_STOPPED = {
    "status_code": 400,
    "json": {
        "error_code": 400,
        "message": "Connectors must be in the STOPPED state before their offsets can be modified. This can be done "
        f"for the specified connector by issuing a 'PUT' request to the '/connectors/{NAME}/stop' endpoint",
    },
}


def _status(state: str, tasks: int = 1) -> dict[str, Any]:
    return {
        "status_code": 200,
        "json": {
            "name": NAME,
            "connector": {"state": state, "worker_id": "127.0.0.1:8083"},
            "tasks": [{"id": i, "state": "RUNNING", "worker_id": "127.0.0.1:8083"} for i in range(tasks)],
            "type": "source",
        },
    }


def _calls(mock: rm.Mocker) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in mock.request_history]


def test_remove_stops_waits_resets_offsets_then_deletes(
    client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]
) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", json={"name": NAME})
    rest_mock.put(f"{URL}/connectors/{NAME}/stop", status_code=202)
    # the tasks shut down first; Connect still refuses the reset once after reporting STOPPED
    rest_mock.get(
        f"{URL}/connectors/{NAME}/status",
        [_status("RUNNING"), _status("STOPPED", tasks=1), _status("STOPPED", tasks=0), _status("STOPPED", tasks=0)],
    )
    rest_mock.delete(
        f"{URL}/connectors/{NAME}/offsets",
        [NOT_STOPPED, {"status_code": 200, "json": {"message": "The offsets for this connector have been reset"}}],
    )
    rest_mock.delete(f"{URL}/connectors/{NAME}", status_code=204)

    assert client.remove(NAME, poll_s=0.25) is True

    status, offsets, connector = (f"/connectors/{NAME}{s}" for s in ("/status", "/offsets", ""))
    assert _calls(rest_mock) == [
        ("GET", connector),
        ("PUT", f"/connectors/{NAME}/stop"),
        ("GET", status),
        ("GET", status),
        ("GET", status),
        ("DELETE", offsets),
        ("GET", status),
        ("DELETE", offsets),
        ("DELETE", connector),
    ]
    assert sleeps == [0.25, 0.25, 0.25]  # polls only: a 400 is never retried by the transport


def test_remove_is_idempotent_when_absent(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", **NOT_FOUND)
    assert client.remove(NAME) is False
    assert _calls(rest_mock) == [("GET", f"/connectors/{NAME}")]


def test_remove_tolerates_a_connector_deleted_meanwhile(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", json={"name": NAME})
    rest_mock.put(f"{URL}/connectors/{NAME}/stop", **NOT_FOUND)
    assert client.remove(NAME) is True
    assert _calls(rest_mock) == [("GET", f"/connectors/{NAME}"), ("PUT", f"/connectors/{NAME}/stop")]


def test_remove_without_reset_only_deletes(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", json={"name": NAME})
    rest_mock.delete(f"{URL}/connectors/{NAME}", status_code=204)
    assert client.remove(NAME, reset_offsets=False) is True
    assert _calls(rest_mock) == [("GET", f"/connectors/{NAME}"), ("DELETE", f"/connectors/{NAME}")]


def test_remove_times_out_when_the_connector_never_stops(
    client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]
) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", json={"name": NAME})
    rest_mock.put(f"{URL}/connectors/{NAME}/stop", status_code=202)
    rest_mock.get(f"{URL}/connectors/{NAME}/status", **_status("RUNNING"))
    with pytest.raises(ConnectTimeoutError, match=rf"connector {NAME} did not stop in 2s \({NAME} connector=RUNNING"):
        client.remove(NAME, timeout_s=2.0, poll_s=0.5)
    assert sleeps == [0.5] * 4
    assert not any(m == "DELETE" for m, _ in _calls(rest_mock))  # neither offsets nor the connector


def test_other_reset_errors_are_raised_at_once(
    client: KafkaConnectClient, rest_mock: rm.Mocker, sleeps: list[float]
) -> None:
    rest_mock.get(f"{URL}/connectors/{NAME}", json={"name": NAME})
    rest_mock.put(f"{URL}/connectors/{NAME}/stop", status_code=202)
    rest_mock.get(f"{URL}/connectors/{NAME}/status", **_status("STOPPED", tasks=0))
    rest_mock.delete(
        f"{URL}/connectors/{NAME}/offsets",
        status_code=400,
        json={"error_code": 400, "message": "Offsets cannot be reset for this connector"},
    )
    with pytest.raises(ConnectBadRequestError, match="cannot be reset"):
        client.remove(NAME)
    assert sleeps == []
    assert ("DELETE", f"/connectors/{NAME}") not in _calls(rest_mock)


def test_reset_offsets_alone(client: KafkaConnectClient, rest_mock: rm.Mocker) -> None:
    rest_mock.delete(f"{URL}/connectors/{NAME}/offsets", json={"message": "reset"})
    client.reset_offsets(NAME)
    rest_mock.delete(f"{URL}/connectors/nope/offsets", status_code=404, json={"error_code": 404, "message": "no"})
    with pytest.raises(ConnectorNotFoundError):
        client.reset_offsets("nope")
