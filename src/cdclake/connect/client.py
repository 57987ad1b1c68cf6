"""A small Kafka Connect REST client on plain ``requests``.

Every call has a (connect, read) timeout. Connection errors, timeouts, HTTP 5xx and HTTP 409
(rebalance in progress) are retried with capped exponential backoff; the sleep function is injectable
so tests never wait. HTTP errors become typed exceptions quoting Connect's own ``message``:

=====================  ==========================================
HTTP status            exception
=====================  ==========================================
400                    :class:`ConnectBadRequestError`
401, 403               :class:`ConnectAuthenticationError`
404                    :class:`ConnectorNotFoundError`
409                    :class:`ConnectRebalanceInProgressError`
5xx                    :class:`ConnectServerError`
(no connection)        :class:`ConnectUnavailableError`
(timeout)              :class:`ConnectTimeoutError`
=====================  ==========================================
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload
from urllib.parse import quote

import requests

from cdclake.connect.masking import mask_config
from cdclake.connect.models import (
    ConnectorOffset,
    ConnectorPlugin,
    ConnectorState,
    ConnectorStatus,
    UpsertResult,
    ValidationResult,
)
from cdclake.exceptions import (
    ConnectAuthenticationError,
    ConnectBadRequestError,
    ConnectError,
    ConnectorNotFoundError,
    ConnectRebalanceInProgressError,
    ConnectServerError,
    ConnectTimeoutError,
    ConnectUnavailableError,
)

logger = logging.getLogger(__name__)

Timeout = float | tuple[float, float]

DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_BASE_S = 0.5
DEFAULT_BACKOFF_MAX_S = 8.0
MAX_RETRIES = 10
RETRY_STATUSES = frozenset({409, 500, 502, 503, 504})

_STATUS_ERRORS: dict[int, type[ConnectError]] = {
    400: ConnectBadRequestError,
    401: ConnectAuthenticationError,
    403: ConnectAuthenticationError,
    404: ConnectorNotFoundError,
    409: ConnectRebalanceInProgressError,
}


def _error_class(status: int) -> type[ConnectError]:
    if status >= 500:
        return ConnectServerError
    return _STATUS_ERRORS.get(status, ConnectError)


def _connect_message(response: requests.Response) -> str:
    """Connect's ``{"error_code": ..., "message": ...}`` body message, or the start of the raw body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason or ""
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(body)[:500]


class KafkaConnectClient:
    """Client of one Kafka Connect cluster's REST API.

    Args:
        base_url: e.g. ``http://127.0.0.1:8083``.
        auth: optional basic-auth ``(user, password)``.
        timeout: seconds, or ``(connect, read)`` seconds, applied to every call.
        retries: how many times a retryable failure is retried (0 disables; capped at 10).
        backoff_base_s: first backoff delay; doubles each retry.
        backoff_max_s: cap of one backoff delay.
        sleep: the sleep function (inject a no-op in tests).
        session: an existing ``requests.Session`` (default: a new one).
        verify: TLS verification flag or CA bundle path, passed to ``requests``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        auth: tuple[str, str] | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff_base_s: float = DEFAULT_BACKOFF_BASE_S,
        backoff_max_s: float = DEFAULT_BACKOFF_MAX_S,
        sleep: Callable[[float], None] = time.sleep,
        session: requests.Session | None = None,
        verify: bool | str = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = min(retries, MAX_RETRIES)
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._session = session or requests.Session()
        self._session.auth = auth
        self._verify = verify

    def __repr__(self) -> str:
        return f"KafkaConnectClient({self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()

    # ---- transport -----------------------------------------------------------------------------

    def backoff_delay(self, attempt: int) -> float:
        """Delay before retry number ``attempt`` (0-based): ``base * 2**attempt``, capped."""
        return float(min(self.backoff_max_s, self.backoff_base_s * (2**attempt)))

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> requests.Response:
        url = self.base_url + path
        for attempt in range(self.retries + 1):
            cause: Exception
            try:
                response = self._session.request(
                    method, url, params=params, json=json, timeout=self.timeout, verify=self._verify
                )
                response.raise_for_status()
                return response
            except requests.Timeout as exc:
                cause = exc
                error: ConnectError = ConnectTimeoutError(
                    f"Kafka Connect {method} {url} timed out (timeout={self.timeout}s)", url=url
                )
                retryable = True
            except requests.ConnectionError as exc:
                cause = exc
                error = ConnectUnavailableError(
                    f"Kafka Connect at {self.base_url} is unreachable ({method} {path}): {exc}", url=url
                )
                retryable = True
            except requests.HTTPError as exc:
                cause = exc
                status = exc.response.status_code if exc.response is not None else 0
                message = _connect_message(exc.response) if exc.response is not None else str(exc)
                error = _error_class(status)(
                    f"Kafka Connect {method} {path} failed with HTTP {status}: {message}", url=url, status=status
                )
                retryable = status in RETRY_STATUSES or status >= 500
            if not retryable or attempt >= self.retries:
                raise error from cause
            delay = self.backoff_delay(attempt)
            logger.warning(
                "Kafka Connect %s %s failed (%s); retry %s/%s in %.1fs",
                method,
                path,
                error,
                attempt + 1,
                self.retries,
                delay,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _connector_path(name: str, suffix: str = "") -> str:
        return f"/connectors/{quote(name, safe='')}{suffix}"

    # ---- cluster and plugins -------------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        """``GET /``: version, commit and Kafka cluster id of the worker.

        Raises:
            ConnectError: on any failure (see the module table).
        """
        body: dict[str, Any] = self._request("GET", "/").json()
        return body

    def list_plugins(self, connectors_only: bool = True) -> list[ConnectorPlugin]:
        """``GET /connector-plugins``.

        Raises:
            ConnectError: on any failure.
        """
        params = {"connectorsOnly": "true" if connectors_only else "false"}
        body = self._request("GET", "/connector-plugins", params=params).json()
        return [ConnectorPlugin.model_validate(p) for p in body]

    def validate(self, connector_class: str, config: Mapping[str, str]) -> ValidationResult:
        """Validate a config with the plugin (``PUT /connector-plugins/{class}/config/validate``).

        Returns:
            The typed result; call :meth:`ValidationResult.raise_for_errors` to fail on errors.

        Raises:
            ConnectorNotFoundError: when the plugin is not installed.
            ConnectError: on any other failure.
        """
        body = {**config, "connector.class": connector_class}
        path = f"/connector-plugins/{quote(connector_class, safe='')}/config/validate"
        result = ValidationResult.from_response(self._request("PUT", path, json=body).json())
        logger.info("Validated config for %s: %s error(s)", connector_class, result.error_count)
        return result

    def validate_or_raise(self, connector_class: str, config: Mapping[str, str], connector: str | None = None) -> None:
        """Validate and raise when Connect reports errors.

        Connect's validate endpoint requires ``name`` (the upsert endpoint takes it from the URL), so
        ``connector`` is added to the validated config as its ``name`` when the config has none.

        Raises:
            ConnectorConfigInvalidError: listing ``key: message`` lines.
            ConnectError: on transport failures.
        """
        if connector and "name" not in config:
            config = {**config, "name": connector}
        self.validate(connector_class, config).raise_for_errors(connector)

    # ---- connectors ----------------------------------------------------------------------------

    @overload
    def list_connectors(self, expand_status: Literal[False] = ...) -> list[str]: ...

    @overload
    def list_connectors(self, expand_status: Literal[True]) -> dict[str, ConnectorStatus]: ...

    def list_connectors(self, expand_status: bool = False) -> list[str] | dict[str, ConnectorStatus]:
        """``GET /connectors`` (names), or with ``expand_status`` a name -> status mapping.

        Raises:
            ConnectError: on any failure.
        """
        if not expand_status:
            return [str(n) for n in self._request("GET", "/connectors").json()]
        body = self._request("GET", "/connectors", params={"expand": "status"}).json()
        return {name: ConnectorStatus.model_validate(item["status"]) for name, item in body.items()}

    def create_or_update(self, name: str, config: Mapping[str, str]) -> UpsertResult:
        """Create or update a connector idempotently (``PUT /connectors/{name}/config``).

        Returns:
            Whether the connector was created (HTTP 201) or updated (HTTP 200), and the stored config.

        Raises:
            ConnectBadRequestError: when Connect rejects the config.
            ConnectRebalanceInProgressError: when the cluster keeps rebalancing past the retries.
            ConnectError: on any other failure.
        """
        logger.info("Upserting connector %s with config %s", name, mask_config(config))
        response = self._request("PUT", self._connector_path(name, "/config"), json=dict(config))
        created = response.status_code == 201
        body = response.json() if response.content else {}
        stored = {str(k): str(v) for k, v in (body.get("config") or {}).items()}
        logger.info("Connector %s %s", name, "created" if created else "updated")
        return UpsertResult(name=name, created=created, config=stored)

    def get_config(self, name: str) -> dict[str, str]:
        """``GET /connectors/{name}/config``.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
            ConnectError: on any other failure.
        """
        return {str(k): str(v) for k, v in self._request("GET", self._connector_path(name, "/config")).json().items()}

    def exists(self, name: str) -> bool:
        """Whether the connector exists.

        Raises:
            ConnectError: on failures other than 404.
        """
        try:
            self._request("GET", self._connector_path(name))
        except ConnectorNotFoundError:
            return False
        return True

    def status(self, name: str) -> ConnectorStatus:
        """``GET /connectors/{name}/status``, typed.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
            ConnectError: on any other failure.
        """
        return ConnectorStatus.model_validate(self._request("GET", self._connector_path(name, "/status")).json())

    def restart(self, name: str, include_tasks: bool = True, only_failed: bool = True) -> ConnectorStatus | None:
        """``POST /connectors/{name}/restart?includeTasks=&onlyFailed=``.

        Returns:
            The status Connect returns with HTTP 202, or None (HTTP 200/204, nothing to report).

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
            ConnectError: on any other failure.
        """
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        logger.info("Restarting connector %s (include_tasks=%s, only_failed=%s)", name, include_tasks, only_failed)
        response = self._request("POST", self._connector_path(name, "/restart"), params=params)
        if response.status_code == 202 and response.content:
            return ConnectorStatus.model_validate(response.json())
        return None

    def restart_task(self, name: str, task_id: int) -> None:
        """``POST /connectors/{name}/tasks/{id}/restart``.

        Raises:
            ConnectorNotFoundError: when the connector or task does not exist.
            ConnectError: on any other failure.
        """
        logger.info("Restarting task %s-%s", name, task_id)
        self._request("POST", self._connector_path(name, f"/tasks/{int(task_id)}/restart"))

    def pause(self, name: str) -> None:
        """``PUT /connectors/{name}/pause``.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
        """
        logger.info("Pausing connector %s", name)
        self._request("PUT", self._connector_path(name, "/pause"))

    def resume(self, name: str) -> None:
        """``PUT /connectors/{name}/resume``.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
        """
        logger.info("Resuming connector %s", name)
        self._request("PUT", self._connector_path(name, "/resume"))

    def stop(self, name: str) -> None:
        """``PUT /connectors/{name}/stop`` (KIP-875: tasks shut down, config kept).

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
        """
        logger.info("Stopping connector %s", name)
        self._request("PUT", self._connector_path(name, "/stop"))

    def delete(self, name: str) -> None:
        """``DELETE /connectors/{name}``.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
        """
        logger.info("Deleting connector %s", name)
        self._request("DELETE", self._connector_path(name))

    def reset_offsets(self, name: str) -> None:
        """``DELETE /connectors/{name}/offsets`` (KIP-875): forget a *stopped* connector's source offsets.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
            ConnectBadRequestError: when the connector is not stopped (Connect refuses with HTTP 400).
        """
        logger.info("Resetting the offsets of connector %s", name)
        self._request("DELETE", self._connector_path(name, "/offsets"))

    def remove(self, name: str, *, reset_offsets: bool = True, timeout_s: float = 60.0, poll_s: float = 0.5) -> bool:
        """Delete a connector, by default resetting its offsets first so a new one of the same name starts over.

        Connect keeps a deleted source connector's offsets under its name: a connector registered
        again with that name would resume where the old one stopped (no new snapshot). With
        ``reset_offsets`` the connector is stopped, waited for until it is ``STOPPED`` with no tasks,
        its offsets are deleted, then the connector. Idempotent: a missing connector (also one that
        disappears meanwhile) is not an error. Every call goes through the client's timeouts and retries.

        Args:
            name: the connector.
            reset_offsets: stop it and delete its offsets before deleting it.
            timeout_s: how long to wait for the connector to stop (and Connect to accept the reset).
            poll_s: delay between status polls (slept with the client's sleep function).

        Returns:
            Whether the connector existed.

        Raises:
            ConnectTimeoutError: when the connector is not stopped within ``timeout_s``.
            ConnectError: on any other failure.
        """
        try:
            if not self.exists(name):
                return False
            if reset_offsets:
                self.stop(name)
                self._reset_when_stopped(name, timeout_s, poll_s)
            self.delete(name)
        except ConnectorNotFoundError:
            logger.info("Connector %s disappeared while being removed", name)
        return True

    def _reset_when_stopped(self, name: str, timeout_s: float, poll_s: float) -> None:
        # stopping is asynchronous: the tasks shut down, then Connect publishes an empty task list;
        # until then it refuses to modify offsets with HTTP 400
        waited = 0.0
        while True:
            status = self.status(name)
            if status.connector.state is ConnectorState.STOPPED and not status.tasks:
                try:
                    self.reset_offsets(name)
                    return
                except ConnectBadRequestError as exc:
                    if "STOPPED" not in str(exc) or waited >= timeout_s:
                        raise
            if waited >= timeout_s:
                url = self.base_url + self._connector_path(name, "/status")
                raise ConnectTimeoutError(
                    f"connector {name} did not stop in {timeout_s:.0f}s ({status.describe()})", url=url
                )
            self._sleep(poll_s)
            waited += poll_s

    def offsets(self, name: str) -> list[ConnectorOffset]:
        """``GET /connectors/{name}/offsets``: source partitions and their committed offsets.

        Raises:
            ConnectorNotFoundError: when the connector does not exist.
            ConnectError: on any other failure.
        """
        body = self._request("GET", self._connector_path(name, "/offsets")).json()
        return [ConnectorOffset.model_validate(item) for item in body.get("offsets") or ()]
