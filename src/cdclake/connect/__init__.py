"""Kafka Connect: the REST API (:class:`KafkaConnectClient` and its typed payload models) and a connector's
lifecycle from its spec (:mod:`cdclake.connect.lifecycle`, :func:`register_connector`)."""

from __future__ import annotations

from cdclake.connect.client import DEFAULT_RETRIES, DEFAULT_TIMEOUT, KafkaConnectClient
from cdclake.connect.lifecycle import ensure_connector, register_connector, wait_running
from cdclake.connect.masking import mask_config
from cdclake.connect.models import (
    ConfigValueError,
    ConnectorOffset,
    ConnectorPlugin,
    ConnectorState,
    ConnectorStatus,
    TaskState,
    UpsertResult,
    ValidationResult,
    WorkerState,
)

__all__ = [
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "ConfigValueError",
    "ConnectorOffset",
    "ConnectorPlugin",
    "ConnectorState",
    "ConnectorStatus",
    "KafkaConnectClient",
    "TaskState",
    "UpsertResult",
    "ValidationResult",
    "WorkerState",
    "ensure_connector",
    "mask_config",
    "register_connector",
    "wait_running",
]
