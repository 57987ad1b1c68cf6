"""Hook reading a Debezium notification topic from the beginning (fresh consumer group, no commits)."""

from __future__ import annotations

import uuid
from typing import Any

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook
from confluent_kafka import Consumer


class DebeziumNotificationHook(KafkaBaseHook):
    """A confluent-kafka Consumer on one notification topic, starting at the earliest offset.

    The Kafka connection's ``extra`` is the client config (as for the apache-kafka provider);
    ``group.id``, ``auto.offset.reset`` and ``enable.auto.commit`` are overridden so every reader
    sees the whole topic and leaves no committed offsets behind.

    Args:
        topic: the notification topic (``<prefix>.notifications``).
        kafka_config_id: the Kafka connection.
        group_id: consumer group (default: a fresh ``cdclake-notifications-<uuid>``).
    """

    hook_name = "Debezium notifications"

    def __init__(self, topic: str, kafka_config_id: str = KafkaBaseHook.default_conn_name, group_id: str | None = None):
        super().__init__(kafka_config_id=kafka_config_id)
        self.topic = topic
        self.group_id = group_id or f"cdclake-notifications-{uuid.uuid4()}"

    def _get_client(self, config: dict[str, Any]) -> Consumer:
        config = {
            **config,
            "group.id": self.group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        return Consumer(config)

    def get_consumer(self) -> Consumer:
        """The consumer, subscribed to the topic."""
        consumer: Consumer = self.get_conn
        consumer.subscribe([self.topic])
        return consumer
