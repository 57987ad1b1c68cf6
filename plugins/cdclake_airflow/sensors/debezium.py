"""Sensor: the Debezium snapshot started by a signal has COMPLETED (via the notification topic)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator

from cdclake.connectors import load_spec
from cdclake.exceptions import SnapshotAbortedError
from cdclake_airflow.triggers.debezium import SnapshotNotificationTrigger


class SnapshotCompletedSensor(BaseSensorOperator):
    """Wait for the COMPLETED notification of the snapshot a signal started; fail on ABORTED.

    Always deferrable: it defers to :class:`SnapshotNotificationTrigger`, which reads the
    notification topic from the beginning with a throw-away consumer group.

    Args:
        signal_id: the ``execute-snapshot`` signal's id, e.g. from ``SendDebeziumSignalOperator``'s XCom (templated).
        spec: connector spec name or path; gives the notification topic (templated).
        notification_topic: the topic, instead of ``spec`` (templated).
        kafka_config_id: the Kafka connection (templated).
        blocking_since_ms: for blocking snapshots, when the signal was sent (templated; see
            :func:`cdclake.signals.snapshot_finished`).
        spec_dir: directory of bare spec names (templated).
        poll_timeout: seconds per consume call.
        poll_interval: seconds to sleep at the end of the topic.
    """

    template_fields: Sequence[str] = (
        "signal_id",
        "spec",
        "notification_topic",
        "kafka_config_id",
        "blocking_since_ms",
        "spec_dir",
    )

    def __init__(
        self,
        *,
        signal_id: str,
        spec: str | None = None,
        notification_topic: str | None = None,
        kafka_config_id: str = "kafka_default",
        blocking_since_ms: int | str | None = None,
        spec_dir: str | None = None,
        poll_timeout: float = 1.0,
        poll_interval: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not spec and not notification_topic:
            raise ValueError("SnapshotCompletedSensor needs spec or notification_topic")
        self.signal_id = signal_id
        self.spec = spec
        self.notification_topic = notification_topic
        self.kafka_config_id = kafka_config_id
        self.blocking_since_ms = blocking_since_ms
        self.spec_dir = spec_dir
        self.poll_timeout = poll_timeout
        self.poll_interval = poll_interval

    def _topic(self) -> str:
        if self.notification_topic:
            return self.notification_topic
        assert self.spec
        return load_spec(self.spec, self.spec_dir).notification_topic

    def execute(self, context: Any) -> None:
        if not self.signal_id:
            raise ValueError("signal_id rendered empty; pass the id returned by SendDebeziumSignalOperator")
        since = int(self.blocking_since_ms) if self.blocking_since_ms not in (None, "", "None") else None
        self.defer(
            trigger=SnapshotNotificationTrigger(
                topic=self._topic(),
                signal_id=str(self.signal_id),
                kafka_config_id=self.kafka_config_id,
                blocking_since_ms=since,
                poll_timeout=self.poll_timeout,
                poll_interval=self.poll_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)),
        )

    def poke(self, context: Any) -> bool:  # pragma: no cover - the sensor always defers
        raise NotImplementedError("SnapshotCompletedSensor is deferrable only")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Handle the trigger's event.

        Raises:
            SnapshotAbortedError: when Debezium reported ABORTED.
        """
        if event.get("status") == "completed":
            self.log.info("Snapshot of signal %s completed", event.get("signal_id"))
            return event
        raise SnapshotAbortedError(
            f"snapshot of signal {event.get('signal_id')} was aborted (notification topic {event.get('topic')})"
        )
