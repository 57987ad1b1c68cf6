"""A connector's lifecycle on Kafka Connect, from its spec.

:func:`register_connector` is the one way a spec's connector is registered: Airflow's ``cdc_connectors`` DAG
(through :class:`~cdclake_airflow.operators.kafka_connect.KafkaConnectorUpsertOperator`), which ``cdclake demo``
triggers, and :func:`ensure_connector` (tests, fixture scripts) call it. :func:`wait_running` waits until a
connector runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cdclake.connect.client import KafkaConnectClient
from cdclake.connect.models import UpsertResult
from cdclake.connectors import ConnectorSpec, DatabaseEndpoint, connect_config
from cdclake.exceptions import ConnectorFailedError, ConnectorNotFoundError


def register_connector(
    client: KafkaConnectClient, spec: ConnectorSpec, endpoint: DatabaseEndpoint, *, validate: bool = True
) -> UpsertResult:
    """Validate the spec's generated config with Connect, then create or update the connector.

    The connector is named after ``spec.connect_name``.

    Args:
        client: the Kafka Connect cluster.
        spec: the connector spec.
        endpoint: the database as the Connect worker sees it.
        validate: call the plugin's validate endpoint first and stop on errors.

    Returns:
        What Connect did: whether the connector was created or updated, and its stored config.

    Raises:
        ConnectorConfigInvalidError: when Connect's validation rejects the config (nothing is registered).
        ConnectError: when Connect rejects or fails the request.
    """
    name = spec.connect_name
    config = connect_config(spec, endpoint)
    if validate:
        client.validate_or_raise(spec.connector_class, config, name)
    return client.create_or_update(name, config)


def wait_running(
    client: KafkaConnectClient, name: str, timeout_s: float = 120.0, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Wait until the connector and its tasks are RUNNING.

    A connector registered a moment ago may have its config stored before its status (``GET .../status`` answers
    404 "No status found" in between): that counts as not running yet.

    Raises:
        ConnectorFailedError: when the connector or a task fails.
        TimeoutError: when it does not run in time.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = client.status(name)
        except ConnectorNotFoundError:
            status = None
        if status is not None and status.is_running:
            return
        if status is not None and status.is_failed:
            raise ConnectorFailedError(f"connector {name} failed:\n{status.failure_summary()}")
        sleep(1.0)
    raise TimeoutError(f"connector {name} is not RUNNING after {timeout_s:.0f}s")


def ensure_connector(client: KafkaConnectClient, spec: ConnectorSpec, endpoint: DatabaseEndpoint) -> str:
    """Register the spec's connector (:func:`register_connector`) unless it already runs; resume or restart it
    when paused or failed.

    Returns:
        What was done: ``running``, ``resumed``, ``restarted`` or ``registered``.

    Raises:
        ConnectorConfigInvalidError: when Connect's validation rejects the config.
    """
    name = spec.connect_name
    if client.exists(name):
        status = client.status(name)
        if status.is_running:
            return "running"
        state = status.connector.state.value
        if state in ("PAUSED", "STOPPED"):
            client.resume(name)
            return "resumed"
        if status.is_failed:
            client.restart(name, include_tasks=True, only_failed=True)
            return "restarted"
    register_connector(client, spec, endpoint)
    return "registered"
