"""Sensor: a Kafka Connect connector and all of its tasks are RUNNING."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator

from cdclake.exceptions import ConnectError, ConnectorFailedError
from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook
from cdclake_airflow.triggers.kafka_connect import ConnectorRunningTrigger


class KafkaConnectorRunningSensor(BaseSensorOperator):
    """Wait until a connector and every task are RUNNING; fail fast when one is FAILED.

    Deferrable by default: ``execute`` defers to :class:`ConnectorRunningTrigger`.

    Args:
        connector_name: the connector on the Connect cluster (templated).
        kafka_connect_conn_id: the Kafka Connect connection (templated).
        poll_interval: seconds between status checks.
        deferrable: defer to the triggerer (default) or poke in the worker.
    """

    template_fields: Sequence[str] = ("connector_name", "kafka_connect_conn_id")

    def __init__(
        self,
        *,
        connector_name: str,
        kafka_connect_conn_id: str = KafkaConnectHook.default_conn_name,
        poll_interval: float = 10.0,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.connector_name = connector_name
        self.kafka_connect_conn_id = kafka_connect_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=ConnectorRunningTrigger(
                connector_name=self.connector_name,
                kafka_connect_conn_id=self.kafka_connect_conn_id,
                poll_interval=self.poll_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)),
        )

    def poke(self, context: Any) -> bool:
        status = KafkaConnectHook(kafka_connect_conn_id=self.kafka_connect_conn_id).status(self.connector_name)
        if status.is_failed:
            raise ConnectorFailedError(status.failure_summary())
        self.log.info("Connector %s", status.describe())
        return status.is_running

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Handle the trigger's event.

        Raises:
            ConnectorFailedError: when the connector or a task is FAILED (message holds the traces).
            ConnectError: when the trigger hit an unexpected Connect error.
        """
        status = event.get("status")
        if status == "running":
            self.log.info("Connector %s is running: %s", self.connector_name, event.get("state"))
            return event
        if status == "failed":
            raise ConnectorFailedError(f"connector {self.connector_name} failed:\n{event.get('message')}")
        raise ConnectError(f"waiting for connector {self.connector_name} failed: {event.get('message')}")
