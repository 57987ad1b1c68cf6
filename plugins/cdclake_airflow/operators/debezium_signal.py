"""Operator sending a Debezium signal (ad hoc snapshot, stop/pause/resume, log) for a connector spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from cdclake.connectors import load_spec
from cdclake.signals import ExecuteSnapshot, SignalType, build_signal
from cdclake_airflow.hooks.debezium_signal import CHANNELS, DebeziumSignalHook


class SendDebeziumSignalOperator(BaseOperator):
    """Send one signal to the connector of a spec, through the signal table or the Kafka topic.

    Args:
        spec: spec name or YAML path (templated).
        signal_type: ``execute-snapshot`` (default), ``stop-snapshot``, ``pause-snapshot``,
            ``resume-snapshot`` or ``log`` (templated).
        data_collections: tables (``schema.table`` ...) for execute/stop-snapshot (templated).
        snapshot_type: ``incremental`` or ``blocking`` (templated).
        additional_conditions: ``[{"data-collection": ..., "filter": ...}]`` (templated); a filter is parsed in
            the source's dialect and sent as regenerated (:mod:`cdclake.signals.filters`).
        surrogate_key: surrogate key column for execute-snapshot (templated).
        message: text of a ``log`` signal (templated).
        signal_id: the signal id; default a new uuid4 (templated).
        channel: ``source`` (signal table, default) or ``kafka`` (templated).
        database_conn_id: overrides the spec's ``connection_id`` (templated).
        kafka_config_id: Kafka connection of the ``kafka`` channel (templated).
        spec_dir: directory of bare spec names (templated).

    Returns (XCom):
        ``{"signal_id", "signal_type", "snapshot_type", "sent_at_ms", "notification_topic"}`` for
        :class:`SnapshotCompletedSensor`.
    """

    template_fields: Sequence[str] = (
        "spec",
        "signal_type",
        "data_collections",
        "snapshot_type",
        "additional_conditions",
        "surrogate_key",
        "message",
        "signal_id",
        "channel",
        "database_conn_id",
        "kafka_config_id",
        "spec_dir",
    )

    def __init__(
        self,
        *,
        spec: str,
        signal_type: str = SignalType.EXECUTE_SNAPSHOT.value,
        data_collections: Sequence[str] | None = None,
        snapshot_type: str | None = None,
        additional_conditions: Sequence[dict[str, str]] | None = None,
        surrogate_key: str | None = None,
        message: str | None = None,
        signal_id: str | None = None,
        channel: str = "source",
        database_conn_id: str | None = None,
        kafka_config_id: str = "kafka_default",
        spec_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.signal_type = signal_type
        self.data_collections = data_collections
        self.snapshot_type = snapshot_type
        self.additional_conditions = additional_conditions
        self.surrogate_key = surrogate_key
        self.message = message
        self.signal_id = signal_id
        self.channel = channel
        self.database_conn_id = database_conn_id
        self.kafka_config_id = kafka_config_id
        self.spec_dir = spec_dir

    def execute(self, context: Any) -> dict[str, Any]:
        if self.channel not in CHANNELS:
            raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, got {self.channel!r}")
        spec = load_spec(self.spec, self.spec_dir)
        signal = build_signal(
            self.signal_type,
            connector=spec.connector,
            id=self.signal_id or None,
            data_collections=list(self.data_collections) if self.data_collections else None,
            snapshot_type=self.snapshot_type or None,
            additional_conditions=list(self.additional_conditions) if self.additional_conditions else None,
            surrogate_key=self.surrogate_key or None,
            message=self.message or None,
        )
        hook = DebeziumSignalHook(spec, database_conn_id=self.database_conn_id, kafka_config_id=self.kafka_config_id)
        sent_at_ms = hook.send(signal, channel=self.channel)  # type: ignore[arg-type]
        return {
            "signal_id": signal.id,
            "signal_type": signal.type,
            "snapshot_type": signal.snapshot_type.value if isinstance(signal, ExecuteSnapshot) else None,
            "sent_at_ms": sent_at_ms,
            "notification_topic": spec.notification_topic,
        }
