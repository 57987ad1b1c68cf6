"""Kafka Connect JSON generation: a :class:`ConnectorSpec` plus the database endpoint become the connector config.

Property names are Debezium 3.x (``topic.prefix``, ``*.include.list``, ``schema.history.internal.*``).
Passwords never appear here: the spec holds a config-provider reference (``${env:...}``) that the
Connect worker resolves.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from cdclake.connectors import properties as p
from cdclake.connectors.spec import DEFAULT_PORTS, ConnectorKind, ConnectorSpec, SignalChannel
from cdclake.exceptions import ConnectorSpecError

_REGEX_SPECIAL = re.compile(r"([\\.^$|?*+()\[\]{}])")

TIME_PRECISION_MODES: dict[ConnectorKind, str] = {
    ConnectorKind.POSTGRESQL: "adaptive_time_microseconds",
    ConnectorKind.MYSQL: "adaptive_time_microseconds",
    ConnectorKind.MARIADB: "adaptive_time_microseconds",
    ConnectorKind.INFORMIX: "adaptive",  # Informix supports only adaptive | connect
}
"""``time.precision.mode`` per connector; MongoDB has no such property."""

SERVER_ID_MIN = 100_000
SERVER_ID_SPAN = 900_000


@dataclass(frozen=True)
class DatabaseEndpoint:
    """Where the Connect worker reaches the source database (from the spec's Airflow connection).

    Attributes:
        host: host name or address, as seen by the Connect worker.
        port: port; None means the connector's default port.
        database: database name from the connection; the spec's ``database`` wins when both are set.
        options: extra connection options (MongoDB connection-string query parameters).
    """

    host: str
    port: int | None = None
    database: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)


def regex_literal(name: str) -> str:
    """Escape a data-collection name for Debezium's anchored-regex include lists (``a.b`` -> ``a\\.b``)."""
    return _REGEX_SPECIAL.sub(r"\\\1", name)


def derive_server_id(name: str) -> int:
    """A deterministic MySQL/MariaDB ``database.server.id`` in [100000, 999999] derived from the spec name."""
    return SERVER_ID_MIN + zlib.crc32(name.encode("utf-8")) % SERVER_ID_SPAN


def derive_slot_name(name: str) -> str:
    """A PostgreSQL replication slot name derived from the spec name (``cdclake_<name>``)."""
    return ("cdclake_" + re.sub(r"[^a-z0-9_]", "_", name.lower()))[:63]


def mongodb_connection_string(spec: ConnectorSpec, db: DatabaseEndpoint) -> str:
    """``mongodb://<user>:${env:...}@host:port/?options``; the password stays a config-provider reference."""
    port = db.port or DEFAULT_PORTS[ConnectorKind.MONGODB]
    options = {**db.options, **spec.connection_options}
    query = f"/?{urlencode(sorted(options.items()))}" if options else "/"
    return f"mongodb://{quote(spec.capture_user, safe='')}:{spec.capture_password}@{db.host}:{port}{query}"


def connect_config(spec: ConnectorSpec, db: DatabaseEndpoint) -> dict[str, str]:
    """Build the Kafka Connect connector config (``PUT /connectors/{name}/config`` body) for a spec.

    The signal table is always added to the captured collections (Debezium needs it for
    incremental-snapshot watermarking). ``spec.extra`` is applied last.

    Args:
        spec: a validated connector spec.
        db: the database endpoint as the Connect worker sees it.

    Returns:
        The config, every value a string, in a stable, readable key order.

    Raises:
        ConnectorSpecError: when no database name is known.
    """
    config = _generated_config(spec, db)
    config.update({key: _stringify(value) for key, value in spec.extra.items()})
    return config


def generated_keys(spec: ConnectorSpec) -> frozenset[str]:
    """The property keys :func:`connect_config` generates for a spec (before ``extra``)."""
    return frozenset(_generated_config(spec, DatabaseEndpoint(host="localhost", database=spec.database)))


def _generated_config(spec: ConnectorSpec, db: DatabaseEndpoint) -> dict[str, str]:
    kind = spec.connector
    database = spec.database or db.database
    if not database:
        raise ConnectorSpecError(f"{spec.describe()}: database: no database name in the spec or the connection")
    include = ",".join(regex_literal(name) for name in spec.captured_collections)

    config: dict[str, str] = {
        p.CONNECTOR_CLASS: spec.connector_class,
        p.TASKS_MAX: p.TASKS_MAX_DEFAULT,
        p.TOPIC_PREFIX: spec.topic_prefix,
    }
    if kind is ConnectorKind.MONGODB:
        config[p.MONGODB_CONNECTION_STRING] = mongodb_connection_string(spec, db)
        config[p.DATABASE_INCLUDE_LIST] = regex_literal(database)
        config[p.COLLECTION_INCLUDE_LIST] = include
    else:
        config[p.DATABASE_HOSTNAME] = db.host
        config[p.DATABASE_PORT] = str(db.port or DEFAULT_PORTS[kind])
        config[p.DATABASE_USER] = spec.capture_user
        config[p.DATABASE_PASSWORD] = spec.capture_password
        if kind is ConnectorKind.POSTGRESQL:
            config[p.DATABASE_DBNAME] = database
            config[p.PLUGIN_NAME] = p.PLUGIN_NAME_DEFAULT
            config[p.SLOT_NAME] = spec.slot_name or derive_slot_name(spec.name)
            config[p.PUBLICATION_NAME] = spec.publication_name or p.PUBLICATION_NAME_DEFAULT
            config[p.PUBLICATION_AUTOCREATE_MODE] = p.PUBLICATION_AUTOCREATE_MODE_DEFAULT
            schemas = dict.fromkeys(name.split(".")[0] for name in spec.captured_collections)
            config[p.SCHEMA_INCLUDE_LIST] = ",".join(regex_literal(s) for s in schemas)
        elif kind in (ConnectorKind.MYSQL, ConnectorKind.MARIADB):
            config[p.DATABASE_SERVER_ID] = str(spec.server_id or derive_server_id(spec.name))
            config[p.DATABASE_INCLUDE_LIST] = regex_literal(database)
        elif kind is ConnectorKind.INFORMIX:
            config[p.DATABASE_DBNAME] = database
        config[p.TABLE_INCLUDE_LIST] = include

    config[p.SNAPSHOT_MODE] = spec.snapshot_mode
    if spec.has_schema_history:
        config[p.SCHEMA_HISTORY_BOOTSTRAP_SERVERS] = spec.kafka_bootstrap_servers
        config[p.SCHEMA_HISTORY_TOPIC] = spec.schema_history_topic
        config[p.INCLUDE_SCHEMA_CHANGES] = "true"

    config[p.SIGNAL_DATA_COLLECTION] = spec.signal_table
    config[p.SIGNAL_ENABLED_CHANNELS] = ",".join(channel.value for channel in spec.signal_channels)
    if SignalChannel.KAFKA in spec.signal_channels:
        config[p.SIGNAL_KAFKA_TOPIC] = spec.signal_topic
        config[p.SIGNAL_KAFKA_BOOTSTRAP_SERVERS] = spec.kafka_bootstrap_servers
    if spec.notifications:
        config[p.NOTIFICATION_ENABLED_CHANNELS] = p.NOTIFICATION_CHANNEL_SINK
        config[p.NOTIFICATION_SINK_TOPIC_NAME] = spec.notification_topic

    config[p.PROVIDE_TRANSACTION_METADATA] = _stringify(spec.transaction_metadata)
    config[p.HEARTBEAT_INTERVAL_MS] = str(spec.heartbeat_interval_ms)
    config[p.POLL_INTERVAL_MS] = str(spec.poll_interval_ms)
    config[p.ERRORS_MAX_RETRIES] = str(spec.errors_max_retries)
    config[p.TOMBSTONES_ON_DELETE] = "true"
    config[p.SKIPPED_OPERATIONS] = p.SKIPPED_OPERATIONS_DEFAULT
    if kind is not ConnectorKind.MONGODB:
        config[p.DECIMAL_HANDLING_MODE] = p.DECIMAL_HANDLING_MODE_DEFAULT
        config[p.TIME_PRECISION_MODE] = TIME_PRECISION_MODES[kind]
        if kind in (ConnectorKind.MYSQL, ConnectorKind.MARIADB):
            # the default ("long") turns BIGINT UNSIGNED values above 2^63-1 into negative numbers
            config[p.BIGINT_UNSIGNED_HANDLING_MODE] = "precise"

    config[p.KEY_CONVERTER] = p.JSON_CONVERTER
    config[p.KEY_CONVERTER_SCHEMAS_ENABLE] = _stringify(spec.converters.key_schemas_enable)
    config[p.VALUE_CONVERTER] = p.JSON_CONVERTER
    config[p.VALUE_CONVERTER_SCHEMAS_ENABLE] = _stringify(spec.converters.value_schemas_enable)
    return config


def _stringify(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
