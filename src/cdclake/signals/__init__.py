"""Debezium signals (models, SQL/MongoDB/Kafka channels) and notification parsing.

Public API::

    signal = build_signal("execute-snapshot", data_collections=["inventory.orders"], connector=spec.connector,
                          additional_conditions=[{"data-collection": "inventory.orders", "filter": "id > 10"}])
    signal = checked_for_spec(signal, spec, columns)  # tables of the spec; filters checked, regenerated
    stmt = signal_insert(spec, signal)            # SQL text with placeholders + bound params
    msg = kafka_signal_message(spec, signal)      # key = topic prefix, JSON value
    done = snapshot_finished(notifications, signal.id)

Snapshot filters are parsed with sqlglot (:mod:`cdclake.signals.filters`, imported when a filter is checked).
"""

from __future__ import annotations

from cdclake.signals.channels import (
    KafkaSignalMessage,
    SqlDialect,
    SqlStatement,
    build_signal_insert,
    kafka_signal_message,
    mongo_client,
    mongo_signal_document,
    send_kafka_signal,
    send_mongo_signal,
    send_sql_signal,
    signal_insert,
)
from cdclake.signals.models import (
    AdditionalCondition,
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    Signal,
    SignalRecord,
    SignalType,
    SnapshotType,
    StopSnapshot,
    build_signal,
    checked_for_spec,
    validate_for_spec,
)
from cdclake.signals.notifications import Notification, parse_notification, snapshot_finished

__all__ = [
    "AdditionalCondition",
    "ExecuteSnapshot",
    "KafkaSignalMessage",
    "LogSignal",
    "Notification",
    "PauseSnapshot",
    "ResumeSnapshot",
    "Signal",
    "SignalRecord",
    "SignalType",
    "SnapshotType",
    "SqlDialect",
    "SqlStatement",
    "StopSnapshot",
    "build_signal",
    "build_signal_insert",
    "checked_for_spec",
    "kafka_signal_message",
    "mongo_client",
    "mongo_signal_document",
    "parse_notification",
    "send_kafka_signal",
    "send_mongo_signal",
    "send_sql_signal",
    "signal_insert",
    "snapshot_finished",
    "validate_for_spec",
]
