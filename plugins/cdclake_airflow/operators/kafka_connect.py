"""Operators for Kafka Connect: upsert a connector from its spec, restart a connector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from cdclake.connect import register_connector
from cdclake.connectors import load_spec
from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook
from cdclake_airflow.hooks.source_database import get_database_endpoint


class KafkaConnectorUpsertOperator(BaseOperator):
    """Validate a connector spec's config with Connect, then create or update the connector
    (:func:`cdclake.connect.register_connector`, named after the spec's ``connect_name``).

    The database host/port come from the spec's Airflow connection (``connection_id``, or
    ``database_conn_id``); the password stays a config-provider reference resolved by the worker.

    Args:
        spec: spec name (``postgres``) or path of the YAML file (templated).
        kafka_connect_conn_id: the Kafka Connect connection (templated).
        database_conn_id: overrides the spec's ``connection_id`` (templated).
        spec_dir: directory of bare spec names; default ``<project>/include/connectors`` (templated).
        validate: call the plugin's validate endpoint first and fail on errors.

    Returns (XCom):
        ``{"connector": name, "created": bool}``.
    """

    template_fields: Sequence[str] = ("spec", "kafka_connect_conn_id", "database_conn_id", "spec_dir")

    def __init__(
        self,
        *,
        spec: str,
        kafka_connect_conn_id: str = KafkaConnectHook.default_conn_name,
        database_conn_id: str | None = None,
        spec_dir: str | None = None,
        validate: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.kafka_connect_conn_id = kafka_connect_conn_id
        self.database_conn_id = database_conn_id
        self.spec_dir = spec_dir
        self.validate = validate

    def execute(self, context: Any) -> dict[str, Any]:
        if not self.spec or not str(self.spec).strip():
            raise ValueError("spec rendered empty; pass a spec name such as 'postgres' or a YAML path")
        spec = load_spec(self.spec, self.spec_dir)
        endpoint = get_database_endpoint(self.database_conn_id or spec.connection_id)
        hook = KafkaConnectHook(kafka_connect_conn_id=self.kafka_connect_conn_id)
        result = register_connector(hook.get_conn, spec, endpoint, validate=self.validate)
        verb = "created" if result.created else "updated"
        self.log.info("Connector %s %s from %s", spec.connect_name, verb, spec.describe())
        return {"connector": spec.connect_name, "created": result.created}


class KafkaConnectorRestartOperator(BaseOperator):
    """Restart a connector (and, by default, only its failed tasks).

    Args:
        connector_name: the connector (templated).
        kafka_connect_conn_id: the Kafka Connect connection (templated).
        include_tasks: restart tasks too.
        only_failed: restart only FAILED instances.
    """

    template_fields: Sequence[str] = ("connector_name", "kafka_connect_conn_id")

    def __init__(
        self,
        *,
        connector_name: str,
        kafka_connect_conn_id: str = KafkaConnectHook.default_conn_name,
        include_tasks: bool = True,
        only_failed: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector_name = connector_name
        self.kafka_connect_conn_id = kafka_connect_conn_id
        self.include_tasks = include_tasks
        self.only_failed = only_failed

    def execute(self, context: Any) -> str | None:
        if not self.connector_name:
            raise ValueError("connector_name rendered empty")
        hook = KafkaConnectHook(kafka_connect_conn_id=self.kafka_connect_conn_id)
        status = hook.restart(self.connector_name, include_tasks=self.include_tasks, only_failed=self.only_failed)
        return status.describe() if status else None
