"""AirflowRestClient against a fake Airflow API (requests_mock): token, renewal, connections, runs."""

from __future__ import annotations

import pytest
import requests
import requests_mock

from cdclake.exceptions import AirflowApiError
from cdclake.orchestration.rest import AirflowRestClient

BASE = "http://airflow.test"


@pytest.fixture
def client() -> AirflowRestClient:
    return AirflowRestClient(BASE, "admin", "pw", retries=1)


def test_the_token_is_fetched_once_and_renewed_when_refused(client: AirflowRestClient) -> None:
    with requests_mock.Mocker() as m:
        token = m.post(f"{BASE}/auth/token", [{"json": {"access_token": "t1"}}, {"json": {"access_token": "t2"}}])
        dags = m.get(f"{BASE}/api/v2/dags/d", [{"status_code": 401, "json": {"detail": "Token Expired"}},
                                               {"json": {"dag_id": "d"}}, {"json": {"dag_id": "d"}}])  # fmt: skip
        assert client.dag("d") == {"dag_id": "d"}
        assert client.dag("d") == {"dag_id": "d"}
        assert token.call_count == 2 and token.request_history[0].json() == {"username": "admin", "password": "pw"}
        assert [r.headers["Authorization"] for r in dags.request_history] == ["Bearer t1", "Bearer t2", "Bearer t2"]


def test_errors_name_the_call_and_the_status(client: AirflowRestClient) -> None:
    with requests_mock.Mocker() as m:
        m.post(f"{BASE}/auth/token", status_code=401, json={"detail": "Invalid credentials"})
        with pytest.raises(AirflowApiError, match=r"POST /auth/token: HTTP 401: Invalid credentials") as info:
            client.token()
        assert info.value.status == 401
    with requests_mock.Mocker() as m:
        m.get(f"{BASE}/api/v2/monitor/health", exc=requests.ConnectionError("refused"))
        with pytest.raises(AirflowApiError, match="Airflow does not answer"):
            client.health()
        assert m.call_count == 2  # one retry


def test_upsert_connection_creates_then_updates(client: AirflowRestClient) -> None:
    with requests_mock.Mocker() as m:
        m.post(f"{BASE}/auth/token", json={"access_token": "t"})
        m.get(f"{BASE}/api/v2/connections/c1", [{"status_code": 404, "json": {"detail": "missing"}},
                                                {"json": {"connection_id": "c1"}}])  # fmt: skip
        created = m.post(f"{BASE}/api/v2/connections", status_code=201, json={"connection_id": "c1"})
        updated = m.patch(f"{BASE}/api/v2/connections/c1", json={"connection_id": "c1"})
        assert client.upsert_connection("c1", {"conn_type": "kafka", "extra": "{}"}) == "created"
        assert client.upsert_connection("c1", {"conn_type": "kafka", "extra": "{}"}) == "updated"
        assert created.last_request.json() == {"connection_id": "c1", "conn_type": "kafka", "extra": "{}"}
        assert updated.call_count == 1


def test_upsert_pool_creates_then_sets_the_slots(client: AirflowRestClient) -> None:
    with requests_mock.Mocker() as m:
        m.post(f"{BASE}/auth/token", json={"access_token": "t"})
        m.get(f"{BASE}/api/v2/pools/spark", [{"status_code": 404, "json": {"detail": "missing"}},
                                             {"json": {"name": "spark", "slots": 1}}])  # fmt: skip
        created = m.post(f"{BASE}/api/v2/pools", status_code=201, json={"name": "spark"})
        updated = m.patch(f"{BASE}/api/v2/pools/spark", json={"name": "spark"})
        assert client.upsert_pool("spark", 1, "jobs") == "created"
        assert client.upsert_pool("spark", 2) == "updated"
        assert created.last_request.json() == {"name": "spark", "slots": 1, "description": "jobs",
                                               "include_deferred": False}  # fmt: skip
        assert updated.last_request.json()["slots"] == 2


def test_trigger_and_wait_for_a_run(client: AirflowRestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cdclake.orchestration.rest.time.sleep", lambda s: None)
    seen: list[str] = []
    with requests_mock.Mocker() as m:
        m.post(f"{BASE}/auth/token", json={"access_token": "t"})
        trigger = m.post(f"{BASE}/api/v2/dags/d/dagRuns", json={"dag_run_id": "manual__1"})
        m.get(f"{BASE}/api/v2/dags/d/dagRuns/manual__1", [{"json": {"state": "queued"}}, {"json": {"state": "running"}},
                                                          {"json": {"state": "success"}}])  # fmt: skip
        m.get(f"{BASE}/api/v2/dags/d/dagRuns/manual__1/taskInstances",
              [{"json": {"task_instances": [{"task_id": "a", "state": None}]}},
               {"json": {"task_instances": [{"task_id": "a", "state": "running"}]}},
               {"json": {"task_instances": [{"task_id": "a", "state": "success"}]}}])  # fmt: skip
        run_id = client.trigger("d", {"source": "postgres"}, note="n")
        run = client.wait_for_run("d", run_id, on_change=lambda r, tasks: seen.append(tasks[0]["state"] or "none"))
        assert trigger.last_request.json() == {"logical_date": None, "conf": {"source": "postgres"}, "note": "n"}
        assert run["state"] == "success" and seen == ["none", "running", "success"]
