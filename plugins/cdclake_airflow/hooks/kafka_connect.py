"""Hook for the Kafka Connect REST API (wraps :class:`cdclake.connect.KafkaConnectClient`)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from cdclake.connect import ConnectorOffset, ConnectorPlugin, ConnectorStatus, KafkaConnectClient, UpsertResult
from cdclake.connect.client import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Timeout
from cdclake.connect.models import ValidationResult
from cdclake.exceptions import CdcError
from cdclake_airflow.hooks.kafka_connect_form import DEFAULT_PORT, KAFKA_CONNECT_FIELD_BEHAVIOUR

SUPPORTED_CONN_TYPES = ("kafka_connect", "http")


class KafkaConnectHook(BaseHook):
    """Talk to a Kafka Connect cluster.

    Connection fields: ``host`` (may include the scheme), ``port`` (default 8083), ``schema`` (the
    scheme, ``http`` or ``https``), ``login``/``password`` (optional basic auth). Extras:
    ``timeout`` (seconds, or ``[connect, read]``), ``retries``, ``backoff_base_s``, ``backoff_max_s``
    and ``verify`` (TLS). A plain ``http`` connection works too.

    Args:
        kafka_connect_conn_id: the Airflow connection id.
    """

    conn_name_attr = "kafka_connect_conn_id"
    default_conn_name = "kafka_connect_default"
    conn_type = "kafka_connect"
    hook_name = "Kafka Connect"

    def __init__(self, kafka_connect_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_connect_conn_id = kafka_connect_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Custom connection-form behaviour (also in the provider info, :mod:`cdclake_airflow.provider`)."""
        return dict(KAFKA_CONNECT_FIELD_BEHAVIOUR)

    def _client_settings(self) -> tuple[str, dict[str, Any]]:
        conn = self.get_connection(self.kafka_connect_conn_id)
        if conn.conn_type not in SUPPORTED_CONN_TYPES:
            raise ValueError(
                f"connection {self.kafka_connect_conn_id!r} has conn_type {conn.conn_type!r}; "
                f"use one of {', '.join(SUPPORTED_CONN_TYPES)}"
            )
        if not conn.host:
            raise ValueError(f"connection {self.kafka_connect_conn_id!r}: 'host' must be provided")
        host = conn.host.rstrip("/")
        if "://" in host:
            base_url = host if conn.port is None or host.count(":") > 1 else f"{host}:{conn.port}"
        else:
            scheme = conn.schema or "http"
            if scheme not in ("http", "https"):
                raise ValueError(
                    f"connection {self.kafka_connect_conn_id!r}: schema must be http or https, got {scheme!r}"
                )
            base_url = f"{scheme}://{host}:{conn.port or DEFAULT_PORT}"
        extra = conn.extra_dejson
        kwargs: dict[str, Any] = {
            "timeout": _parse_timeout(extra.get("timeout", DEFAULT_TIMEOUT), self.kafka_connect_conn_id),
            "retries": int(extra.get("retries", DEFAULT_RETRIES)),
        }
        for key in ("backoff_base_s", "backoff_max_s"):
            if key in extra:
                kwargs[key] = float(extra[key])
        if "verify" in extra:
            kwargs["verify"] = extra["verify"]
        if conn.login:
            kwargs["auth"] = (conn.login, conn.password or "")
        return base_url, kwargs

    def _get_client(self, base_url: str, **kwargs: Any) -> KafkaConnectClient:
        return KafkaConnectClient(base_url, **kwargs)

    @cached_property
    def get_conn(self) -> KafkaConnectClient:
        """The lazily built client."""
        base_url, kwargs = self._client_settings()
        self.log.info("Kafka Connect client for %s (connection %s)", base_url, self.kafka_connect_conn_id)
        return self._get_client(base_url, **kwargs)

    def test_connection(self) -> tuple[bool, str]:
        """Call ``GET /`` on the worker."""
        try:
            info = self.get_conn.server_info()
        except (CdcError, ValueError) as exc:
            return False, str(exc)
        return True, f"Kafka Connect {info.get('version')} (cluster {info.get('kafka_cluster_id')})"

    # ---- thin delegations ------------------------------------------------------------------------

    def list_plugins(self, connectors_only: bool = True) -> list[ConnectorPlugin]:
        """See :meth:`KafkaConnectClient.list_plugins`."""
        return self.get_conn.list_plugins(connectors_only)

    def validate(self, connector_class: str, config: Mapping[str, str]) -> ValidationResult:
        """See :meth:`KafkaConnectClient.validate`."""
        return self.get_conn.validate(connector_class, config)

    def validate_or_raise(self, connector_class: str, config: Mapping[str, str], connector: str | None = None) -> None:
        """See :meth:`KafkaConnectClient.validate_or_raise` (which adds ``connector`` as the config's ``name``)."""
        self.get_conn.validate_or_raise(connector_class, config, connector)

    def create_or_update(self, name: str, config: Mapping[str, str]) -> UpsertResult:
        """See :meth:`KafkaConnectClient.create_or_update`."""
        return self.get_conn.create_or_update(name, config)

    def get_config(self, name: str) -> dict[str, str]:
        """See :meth:`KafkaConnectClient.get_config`."""
        return self.get_conn.get_config(name)

    def status(self, name: str) -> ConnectorStatus:
        """See :meth:`KafkaConnectClient.status`."""
        return self.get_conn.status(name)

    def restart(self, name: str, include_tasks: bool = True, only_failed: bool = True) -> ConnectorStatus | None:
        """See :meth:`KafkaConnectClient.restart`."""
        return self.get_conn.restart(name, include_tasks=include_tasks, only_failed=only_failed)

    def restart_task(self, name: str, task_id: int) -> None:
        """See :meth:`KafkaConnectClient.restart_task`."""
        self.get_conn.restart_task(name, task_id)

    def pause(self, name: str) -> None:
        """See :meth:`KafkaConnectClient.pause`."""
        self.get_conn.pause(name)

    def resume(self, name: str) -> None:
        """See :meth:`KafkaConnectClient.resume`."""
        self.get_conn.resume(name)

    def stop(self, name: str) -> None:
        """See :meth:`KafkaConnectClient.stop`."""
        self.get_conn.stop(name)

    def delete(self, name: str) -> None:
        """See :meth:`KafkaConnectClient.delete`."""
        self.get_conn.delete(name)

    def list_connectors(self, expand_status: bool = False) -> list[str] | dict[str, ConnectorStatus]:
        """See :meth:`KafkaConnectClient.list_connectors`."""
        if expand_status:
            return self.get_conn.list_connectors(expand_status=True)
        return self.get_conn.list_connectors()

    def offsets(self, name: str) -> list[ConnectorOffset]:
        """See :meth:`KafkaConnectClient.offsets`."""
        return self.get_conn.offsets(name)


def _parse_timeout(value: Any, conn_id: str) -> Timeout:
    try:
        if isinstance(value, list | tuple):
            connect, read = (float(v) for v in value)
            return (connect, read)
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"connection {conn_id!r}: extra 'timeout' must be seconds or [connect, read] seconds, got {value!r}"
        ) from exc
