"""Trigger waiting for a Kafka Connect connector and all its tasks to be RUNNING."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from cdclake.exceptions import ConnectError, ConnectorNotFoundError, ConnectUnavailableError

log = logging.getLogger(__name__)


class ConnectorRunningTrigger(BaseTrigger):
    """Poll ``GET /connectors/{name}/status`` until the connector and every task are RUNNING.

    Events (``event["status"]``): ``running``; ``failed`` (connector or a task FAILED; ``message``
    holds the worker traces); ``error`` (an unexpected Connect error). A missing connector or an
    unreachable worker is treated as transient and polled again; the sensor's timeout bounds the wait.

    Args:
        connector_name: the connector on the Connect cluster.
        kafka_connect_conn_id: the Kafka Connect connection.
        poll_interval: seconds between polls.
    """

    def __init__(self, connector_name: str, kafka_connect_conn_id: str, poll_interval: float = 10.0) -> None:
        super().__init__()
        self.connector_name = connector_name
        self.kafka_connect_conn_id = kafka_connect_conn_id
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "connector_name": self.connector_name,
                "kafka_connect_conn_id": self.kafka_connect_conn_id,
                "poll_interval": self.poll_interval,
            },
        )

    def _hook(self) -> Any:
        from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook

        return KafkaConnectHook(kafka_connect_conn_id=self.kafka_connect_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self._hook()
        get_status = sync_to_async(hook.status)
        while True:
            try:
                status = await get_status(self.connector_name)
            except (ConnectorNotFoundError, ConnectUnavailableError) as exc:
                log.warning("Connector %s not observable yet: %s", self.connector_name, exc)
            except ConnectError as exc:
                yield TriggerEvent({"status": "error", "connector": self.connector_name, "message": str(exc)})
                return
            else:
                if status.is_failed:
                    yield TriggerEvent(
                        {"status": "failed", "connector": self.connector_name, "message": status.failure_summary()}
                    )
                    return
                if status.is_running:
                    yield TriggerEvent(
                        {"status": "running", "connector": self.connector_name, "state": status.describe()}
                    )
                    return
                log.info("Waiting for connector %s: %s", self.connector_name, status.describe())
            await asyncio.sleep(self.poll_interval)
