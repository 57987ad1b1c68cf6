"""What each topic of a batch carries, told from its sample records: change events of a table, transaction
events, schema changes, heartbeats, notifications, the connector's schema history, or nothing recognisable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdclake.debezium import fields as f
from cdclake.decode.options import DecodeOptions
from cdclake.decode.topics import DiscoveredTopic
from cdclake.dialects import Dialect, get_dialect
from cdclake.exceptions import UnsupportedDialectError

#: a sample's payload and embedded schema (either None when the sample has none)
Unwrapped = tuple[dict[str, Any] | None, dict[str, Any] | None]

_NOTIFICATION_TOPIC_SUFFIX = ".notifications"
_SCHEMA_HISTORY_TOPIC_SUFFIX = ".schema-history"
_NOTIFICATION_FIELDS = ("id", "type", "aggregate_type")


def unwrap(sample: Any, schemas: bool) -> Unwrapped:
    """The payload and schema of a parsed record value (with schemas off, the value is the payload)."""
    if not isinstance(sample, dict):
        return None, None
    if schemas and f.PAYLOAD in sample:
        payload, schema = sample.get(f.PAYLOAD), sample.get(f.SCHEMA)
        return (payload if isinstance(payload, dict) else None), (schema if isinstance(schema, dict) else None)
    return sample, None


def classify(topic: str, payload: dict[str, Any]) -> str | None:
    """The kind of a record's payload: ``data``, ``transaction``, ``schema_change``, ``notification``,
    ``schema_history``, or None."""
    if topic.endswith(f.TRANSACTION_TOPIC_SUFFIX) and f.TX_STATUS in payload:
        return "transaction"
    if f.OP in payload or f.AFTER in payload or f.BEFORE in payload:
        return "data"
    if all(k in payload for k in _NOTIFICATION_FIELDS):
        # io.debezium.connector.common.Notification (sink channel, topic <prefix>.notifications)
        return "notification"
    source = payload.get(f.SOURCE)
    if (f.SC_DDL in payload or f.SC_TABLE_CHANGES in payload) and (
        topic.endswith(_SCHEMA_HISTORY_TOPIC_SUFFIX)
        or (isinstance(payload.get("position"), dict) and isinstance(source, dict) and "server" in source)
    ):
        # the connector's internal schema history (raw JSON, never wrapped in schema/payload): not for consumers
        return "schema_history"
    if f.TX_STATUS in payload and f.TX_ID in payload:
        return "transaction"
    if f.SC_DDL in payload or f.SC_TABLE_CHANGES in payload or f.SC_DATABASE_NAME in payload:
        return "schema_change"
    return None


def infer_connector(source: dict[str, Any]) -> str | None:
    """The connector of a source block: ``source.connector``, else told from the connector's own fields."""
    if source.get(f.SRC_CONNECTOR):
        return str(source[f.SRC_CONNECTOR])
    if f.SRC_FILE in source:
        return "mysql"
    if f.SRC_COMMIT_LSN in source:
        return "informix"
    if f.SRC_ORD in source:
        return "mongodb"
    if f.SRC_LSN in source:
        return "postgresql"
    return None


@dataclass
class TopicKinds:
    """The topics of a batch by kind.

    Attributes:
        data: topics of change events, with their unwrapped samples (latest schema version first).
        transactions: transaction topics.
        schema_changes: schema change topics, with their connector's dialect (None when unsupported).
        unrecognised: topics whose records are dead letters, with the reason.
        other: what every record of a topic without a decoding of its own counts as (tombstones aside).
        prefixes: topic prefixes named by heartbeat and transaction topics (and the options).
    """

    data: list[tuple[DiscoveredTopic, list[Unwrapped]]] = field(default_factory=list)
    transactions: list[str] = field(default_factory=list)
    schema_changes: dict[str, Dialect | None] = field(default_factory=dict)
    unrecognised: dict[str, str] = field(default_factory=dict)
    other: dict[str, str] = field(default_factory=dict)
    prefixes: set[str] = field(default_factory=set)


def classify_topics(topics: Mapping[str, DiscoveredTopic], options: DecodeOptions) -> TopicKinds:
    """Sort the discovered topics by the kind of their samples (the latest schema version's first)."""
    schemas = options.value_schemas_enabled
    kinds = TopicKinds(prefixes={options.topic_prefix} if options.topic_prefix else set())
    for topic in topics.values():
        if topic.name.startswith(f.HEARTBEAT_TOPIC_PREFIX):
            kinds.other[topic.name] = "heartbeats"
            kinds.prefixes.add(topic.name[len(f.HEARTBEAT_TOPIC_PREFIX) :])
            continue
        unwrapped = [unwrap(s, schemas) for g in reversed(topic.groups) for s in g.samples]
        kind = next((k for k in (classify(topic.name, p) for p, _ in unwrapped if p is not None) if k), None)
        if topic.records == topic.tombstones:
            kinds.other[topic.name] = "tombstones"
        elif kind in ("notification", "schema_history"):
            kinds.other[topic.name] = "notifications_skipped" if kind == "notification" else "schema_history_skipped"
        elif kind == "transaction":
            kinds.transactions.append(topic.name)
            kinds.prefixes.add(topic.name.removesuffix(f.TRANSACTION_TOPIC_SUFFIX))
        elif kind == "schema_change":
            source = next((p.get(f.SOURCE) for p, _ in unwrapped if p and isinstance(p.get(f.SOURCE), dict)), {})
            try:
                kinds.schema_changes[topic.name] = get_dialect(infer_connector(source or {}))
            except UnsupportedDialectError:
                kinds.schema_changes[topic.name] = None
        elif kind == "data":
            kinds.data.append((topic, unwrapped))
        else:
            kinds.unrecognised[topic.name] = "unrecognised_record"
    return kinds
