"""Trigger waiting for the Debezium notification that ends the snapshot a signal started."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from cdclake.exceptions import NotificationDecodeError
from cdclake.signals import Notification, parse_notification, snapshot_finished

log = logging.getLogger(__name__)

BATCH_SIZE = 500


class SnapshotNotificationTrigger(BaseTrigger):
    """Consume the notification topic from the beginning until the signal's COMPLETED or ABORTED arrives.

    Events: ``{"status": "completed" | "aborted", "signal_id", "topic"}``.

    Args:
        topic: the notification topic (``<prefix>.notifications``).
        signal_id: id of the ``execute-snapshot`` signal.
        kafka_config_id: the Kafka connection (client config in its extra).
        blocking_since_ms: for blocking snapshots, the epoch-ms the signal was sent (time matching).
        poll_timeout: seconds one ``consume`` call waits.
        poll_interval: seconds to sleep when the end of the topic is reached.
    """

    def __init__(
        self,
        topic: str,
        signal_id: str,
        kafka_config_id: str = "kafka_default",
        blocking_since_ms: int | None = None,
        poll_timeout: float = 1.0,
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.signal_id = signal_id
        self.kafka_config_id = kafka_config_id
        self.blocking_since_ms = blocking_since_ms
        self.poll_timeout = poll_timeout
        self.poll_interval = poll_interval
        self._consumer: Any = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topic": self.topic,
                "signal_id": self.signal_id,
                "kafka_config_id": self.kafka_config_id,
                "blocking_since_ms": self.blocking_since_ms,
                "poll_timeout": self.poll_timeout,
                "poll_interval": self.poll_interval,
            },
        )

    def _hook(self) -> Any:
        from cdclake_airflow.hooks.debezium_notification import DebeziumNotificationHook

        return DebeziumNotificationHook(topic=self.topic, kafka_config_id=self.kafka_config_id)

    def _decode(self, messages: list[Any]) -> list[Notification]:
        notifications = []
        for msg in messages:
            if msg.error():
                log.warning(
                    "Kafka error on topic %s partition %s offset %s: %s",
                    msg.topic(),
                    msg.partition(),
                    msg.offset(),
                    msg.error(),
                )
                continue
            if msg.value() is None:
                continue
            try:
                notifications.append(
                    parse_notification(msg.value(), topic=msg.topic(), partition=msg.partition(), offset=msg.offset())
                )
            except NotificationDecodeError as exc:
                log.warning("Skipping undecodable notification: %s", exc)
        return notifications

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self._hook()
        self._consumer = await sync_to_async(hook.get_consumer)()
        consume = sync_to_async(self._consumer.consume)
        try:
            while True:
                messages = await consume(num_messages=BATCH_SIZE, timeout=self.poll_timeout)
                outcome = snapshot_finished(
                    self._decode(messages), self.signal_id, blocking_since_ms=self.blocking_since_ms
                )
                if outcome is not None:
                    status = "completed" if outcome else "aborted"
                    log.info("Snapshot of signal %s %s (topic %s)", self.signal_id, status, self.topic)
                    # release the consumer before handing over the event: the generator may never be resumed
                    await self.cleanup()
                    yield TriggerEvent({"status": status, "signal_id": self.signal_id, "topic": self.topic})
                    return
                if not messages:
                    await asyncio.sleep(self.poll_interval)
        finally:
            await self.cleanup()

    async def cleanup(self) -> None:
        """Close the consumer; failures are logged, not raised."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            await sync_to_async(consumer.close)()
        except Exception as exc:
            log.warning("Closing the notification consumer failed: %s", exc)
