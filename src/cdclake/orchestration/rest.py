"""A small client of Airflow 3's REST API (``/api/v2``), for what cdclake drives from outside Airflow.

``cdclake stack up`` stores the stack's connections through it, ``cdclake demo`` triggers and follows DAG
runs, and the tests use it like an operator would. It authenticates with ``POST /auth/token`` (the simple
auth manager's user and password) and sends the token as a bearer header; an expired token is renewed once.
Every call has a timeout; connection errors and 5xx answers are retried with backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from cdclake.exceptions import AirflowApiError

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = (5.0, 30.0)
DEFAULT_RETRIES = 3
#: DAG run states after which a run does not change any more.
FINISHED_STATES = frozenset({"success", "failed"})


class AirflowRestClient:
    """Calls Airflow's public REST API as one user.

    Args:
        base_url: ``http://127.0.0.1:8080`` (no trailing ``/api/v2``).
        username, password: a user of the auth manager (the stack's ``admin``).
        timeout: seconds, or ``(connect, read)`` seconds, per request.
        retries: further attempts after a connection error or a 5xx answer.
    """

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self._password = password
        self.timeout = timeout
        self.retries = retries
        self._session = requests.Session()
        self._token: str | None = None

    def __repr__(self) -> str:
        return f"AirflowRestClient({self.base_url!r}, user={self.username!r})"

    # -- transport ---------------------------------------------------------------------------------

    def token(self, renew: bool = False) -> str:
        """A JWT for the user (``POST /auth/token``), cached until it is refused.

        Raises:
            AirflowApiError: when Airflow refuses the credentials or does not answer.
        """
        if self._token is None or renew:
            body = self._send("POST", "/auth/token", json={"username": self.username, "password": self._password})
            self._token = str(body["access_token"])
        return self._token

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        expect: Sequence[int] = (200,),
    ) -> Any:
        """One authenticated call; returns the decoded JSON body (None for an empty one).

        Raises:
            AirflowApiError: on an answer not in ``expect`` (with its status and detail), or no answer.
        """
        headers = {"Authorization": f"Bearer {self.token()}"}
        try:
            return self._send(method, path, json=json, params=params, headers=headers, expect=expect)
        except AirflowApiError as exc:
            if exc.status != 401:
                raise
        headers = {"Authorization": f"Bearer {self.token(renew=True)}"}
        return self._send(method, path, json=json, params=params, headers=headers, expect=expect)

    def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        expect: Sequence[int] = (200, 201),
    ) -> Any:
        url = self.base_url + path
        for attempt in range(self.retries + 1):
            try:
                response = self._session.request(
                    method, url, json=json, params=params, headers=headers, timeout=self.timeout
                )
            except requests.RequestException as exc:
                if attempt == self.retries:
                    raise AirflowApiError(f"{method} {url}: Airflow does not answer: {exc}") from exc
            else:
                if response.status_code < 500 or attempt == self.retries:
                    break
            time.sleep(min(0.5 * 2**attempt, 5.0))
        if response.status_code not in expect:
            raise AirflowApiError(
                f"{method} {path}: HTTP {response.status_code}: {_detail(response)}", status=response.status_code
            )
        return response.json() if response.content else None

    # -- the calls cdclake makes -----------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /api/v2/monitor/health`` (no authentication)."""
        return self._send("GET", "/api/v2/monitor/health", expect=(200,))  # type: ignore[no-any-return]

    def upsert_connection(self, conn_id: str, fields: Mapping[str, Any]) -> str:
        """Create the connection, or replace its fields; returns ``created`` or ``updated``.

        Args:
            fields: ``conn_type``, ``host``, ``port``, ``login``, ``password``, ``schema``, ``extra`` (a JSON string).
        """
        return self._upsert("/api/v2/connections", "connection_id", {"connection_id": conn_id, **fields})

    def upsert_pool(self, name: str, slots: int, description: str = "") -> str:
        """Create the pool, or set its slots; returns ``created`` or ``updated``."""
        body = {"name": name, "slots": slots, "description": description, "include_deferred": False}
        return self._upsert("/api/v2/pools", "name", body)

    def _upsert(self, collection: str, key: str, body: Mapping[str, Any]) -> str:
        """POST ``body`` to ``collection`` unless the item named ``body[key]`` exists, else PATCH it."""
        name = body[key]
        found = self.request("GET", f"{collection}/{name}", expect=(200, 404))
        if found is None or found.get(key) != name:
            self.request("POST", collection, json=body, expect=(201,))
            return "created"
        self.request("PATCH", f"{collection}/{name}", json=body)
        return "updated"

    def connection(self, conn_id: str) -> dict[str, Any] | None:
        """The connection as the API shows it (password masked), or None."""
        found = self.request("GET", f"/api/v2/connections/{conn_id}", expect=(200, 404))
        return found if found and found.get("connection_id") == conn_id else None

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        """The DAG, or None when the DAG processor has not stored it (yet)."""
        found = self.request("GET", f"/api/v2/dags/{dag_id}", expect=(200, 404))
        return found if found and found.get("dag_id") == dag_id else None

    def dag_ids(self, tags: Sequence[str] = ()) -> list[str]:
        """The stored DAGs' ids (only those with all ``tags``)."""
        params: dict[str, Any] = {"limit": 1000}
        if tags:
            params["tags"] = list(tags)
            params["tags_match_mode"] = "all"
        return sorted(d["dag_id"] for d in self.request("GET", "/api/v2/dags", params=params)["dags"])

    def set_paused(self, dag_id: str, paused: bool) -> None:
        """Pause or unpause one DAG."""
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": paused})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, note: str | None = None) -> str:
        """Start a manual DAG run now; returns its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if note:
            body["note"] = note
        return str(self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """One DAG run."""
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")  # type: ignore[no-any-return]

    def dag_runs(
        self, dag_id: str, *, run_type: str | None = None, state: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The DAG's runs, newest first (``run_type``: ``scheduled``, ``manual``, ...)."""
        params: dict[str, Any] = {"limit": limit, "order_by": "-run_after"}
        if run_type:
            params["run_type"] = [run_type]
        if state:
            params["state"] = [state]
        return list(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns", params=params)["dag_runs"])

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """The run's task instances (every map index)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
        return list(self.request("GET", path, params={"limit": 1000})["task_instances"])

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """A task's XCom value (deserialized), or None when it has none."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}"
        found = self.request("GET", path, params={"deserialize": True}, expect=(200, 404))
        return found.get("value") if found and "value" in found else None

    def plugins(self) -> list[dict[str, Any]]:
        """``GET /api/v2/plugins``."""
        return list(self.request("GET", "/api/v2/plugins")["plugins"])

    def wait_for_dag(self, dag_id: str, timeout_s: float = 180.0) -> dict[str, Any]:
        """Wait until the DAG processor has stored ``dag_id``.

        Raises:
            TimeoutError: naming the DAG and the import errors Airflow reports.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.dag(dag_id)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                errors = self.request("GET", "/api/v2/importErrors").get("import_errors", [])
                raise TimeoutError(
                    f"DAG {dag_id} is not in Airflow after {timeout_s:.0f}s; import errors: "
                    + ("; ".join(f"{e['filename']}: {e['stack_trace'][-300:]}" for e in errors) or "none")
                )
            time.sleep(2.0)

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout_s: float = 600.0,
        on_change: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
    ) -> dict[str, Any]:
        """Wait until the run finished; returns it.

        Args:
            on_change: called with the run and its task instances whenever a task's state changes.

        Raises:
            TimeoutError: when it is still running after ``timeout_s``, with its task states.
        """
        deadline = time.monotonic() + timeout_s
        last: tuple[tuple[str, int, str | None], ...] = ()
        while True:
            run = self.dag_run(dag_id, run_id)
            if on_change is not None or run["state"] not in FINISHED_STATES:
                tasks = self.task_instances(dag_id, run_id)
                states = tuple(sorted((t["task_id"], t.get("map_index", -1), t.get("state")) for t in tasks))
                if on_change is not None and states != last:
                    on_change(run, tasks)
                last = states
            if run["state"] in FINISHED_STATES:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"DAG run {dag_id}/{run_id} is {run['state']} after {timeout_s:.0f}s; tasks: "
                    + ", ".join(f"{t}[{m}]={s}" if m >= 0 else f"{t}={s}" for t, m, s in last)
                )
            time.sleep(2.0)


def _detail(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return str(detail)[:500]
