"""Kafka Connect REST API: :class:`KafkaConnectClient` and its typed payload models."""

from __future__ import annotations

from cdclake.connect.client import DEFAULT_RETRIES, DEFAULT_TIMEOUT, KafkaConnectClient
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
    "mask_config",
]
