"""Provider information of ``cdclake-airflow`` (entry point ``apache_airflow_provider``).

It registers the ``kafka_connect`` connection type with its hook and its form (labels, placeholders), so that
Admin -> Connections offers "Kafka Connect" like any provider's connection type.
"""

from __future__ import annotations

from typing import Any

from cdclake_airflow.hooks.kafka_connect_form import KAFKA_CONNECT_FIELD_BEHAVIOUR

PACKAGE_NAME = "cdclake-airflow"


def get_provider_info() -> dict[str, Any]:
    """What ``airflow providers list`` and the connection form read (no hook import needed)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "cdclake",
        "description": "cdclake: Debezium on Kafka Connect into Apache Iceberg, run from Apache Airflow.",
        "versions": ["0.1.0"],
        "connection-types": [
            {
                "connection-type": "kafka_connect",
                "hook-class-name": "cdclake_airflow.hooks.kafka_connect.KafkaConnectHook",
                "hook-name": "Kafka Connect",
                "ui-field-behaviour": KAFKA_CONNECT_FIELD_BEHAVIOUR,
            }
        ],
        "hooks": [
            {
                "integration-name": "Kafka Connect",
                "python-modules": ["cdclake_airflow.hooks.kafka_connect"],
            }
        ],
        "plugins": [{"name": "cdclake", "plugin-class": "cdclake_airflow.plugin.CdcLakePlugin"}],
    }
