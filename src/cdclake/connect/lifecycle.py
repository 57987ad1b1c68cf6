"""A connector's lifecycle outside Airflow (tests, fixture scripts): register it unless it runs, wait until it runs.

Airflow's ``cdc_connectors`` DAG does the same through :class:`~cdclake_airflow.operators.kafka_connect` operators.
"""

from __future__ import annotations

import time

from cdclake.connect.client import KafkaConnectClient
from cdclake.connectors import ConnectorSpec, DatabaseEndpoint, connect_config
from cdclake.exceptions import ConnectorFailedError


def wait_running(client: KafkaConnectClient, name: str, timeout_s: float = 120.0) -> None:
    """Wait until the connector and its tasks are RUNNING.

    Raises:
        ConnectorFailedError: when the connector or a task fails.
        TimeoutError: when it does not run in time.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.exists(name):
            status = client.status(name)
            if status.is_running:
                return
            if status.is_failed:
                raise ConnectorFailedError(f"connector {name} failed:\n{status.failure_summary()}")
        time.sleep(1.0)
    raise TimeoutError(f"connector {name} is not RUNNING after {timeout_s:.0f}s")


def ensure_connector(client: KafkaConnectClient, spec: ConnectorSpec, endpoint: DatabaseEndpoint) -> str:
    """Register the spec's connector unless it already runs; resume or restart it when paused or failed.

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
    config = connect_config(spec, endpoint)
    client.validate_or_raise(config["connector.class"], {**config, "name": name}, connector=name)
    client.create_or_update(name, config)
    return "registered"
