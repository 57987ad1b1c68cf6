"""Kafka Connect / Debezium 3.x property keys used by the generator, paired with our defaults.

Key strings are written once here and never retyped inline (STYLE synthesis 7).
"""

from __future__ import annotations

# --- Kafka Connect framework -------------------------------------------------------------------
CONNECTOR_CLASS = "connector.class"
TASKS_MAX = "tasks.max"
TASKS_MAX_DEFAULT = "1"
KEY_CONVERTER = "key.converter"
VALUE_CONVERTER = "value.converter"
KEY_CONVERTER_SCHEMAS_ENABLE = "key.converter.schemas.enable"
VALUE_CONVERTER_SCHEMAS_ENABLE = "value.converter.schemas.enable"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

# --- Debezium common ---------------------------------------------------------------------------
TOPIC_PREFIX = "topic.prefix"
TABLE_INCLUDE_LIST = "table.include.list"
COLLECTION_INCLUDE_LIST = "collection.include.list"
SCHEMA_INCLUDE_LIST = "schema.include.list"
DATABASE_INCLUDE_LIST = "database.include.list"
SNAPSHOT_MODE = "snapshot.mode"
SNAPSHOT_MODE_DEFAULT = "initial"
TOMBSTONES_ON_DELETE = "tombstones.on.delete"
DECIMAL_HANDLING_MODE = "decimal.handling.mode"
DECIMAL_HANDLING_MODE_DEFAULT = "precise"
TIME_PRECISION_MODE = "time.precision.mode"
BIGINT_UNSIGNED_HANDLING_MODE = "bigint.unsigned.handling.mode"
BINARY_HANDLING_MODE = "binary.handling.mode"
INCLUDE_UNKNOWN_DATATYPES = "include.unknown.datatypes"
#: comma-separated names of custom converters; ``<name>.type`` is each one's class, ``<name>.selector`` its columns
CONVERTERS = "converters"
CONVERTER_TYPE_SUFFIX = ".type"
CONVERTER_SELECTOR_SUFFIX = ".selector"
#: the TINYINT(1) converter's switch: ``false`` converts TINYINT columns of any length
CONVERTER_LENGTH_CHECKER_SUFFIX = ".length.checker"
#: the class name (any package) of Debezium's converter that turns MySQL/MariaDB ``TINYINT(1)`` into BOOLEAN
TINYINT_ONE_TO_BOOLEAN_CONVERTER = "TinyIntOneToBooleanConverter"
PROVIDE_TRANSACTION_METADATA = "provide.transaction.metadata"
HEARTBEAT_INTERVAL_MS = "heartbeat.interval.ms"
SKIPPED_OPERATIONS = "skipped.operations"
#: Debezium skips truncates by default (``t``); the lake applies them (rows before the truncate go)
SKIPPED_OPERATIONS_DEFAULT = "none"
HEARTBEAT_INTERVAL_MS_DEFAULT = 10_000
#: How long the connector's task gathers change events before it hands them to Connect, unless a batch
#: (``max.batch.size``, 2,048) fills first. Under a load that does not fill a batch in that time, every change waits
#: it out before it reaches Kafka, which Debezium's own default (500 ms) makes a noticeable part of a continuous
#: follower's latency (docs/benchmarks.md, continuous mode)
POLL_INTERVAL_MS = "poll.interval.ms"
POLL_INTERVAL_MS_DEFAULT = 100
#: Debezium's retries of a retriable error (a lost connection, a refused login) before the task fails; its own
#: default, -1, retries for ever with the task RUNNING, so an operator never sees a lost privilege
ERRORS_MAX_RETRIES = "errors.max.retries"
#: about five minutes of retries at Debezium's ``retriable.restart.connector.wait.ms`` (10 s) before FAILED
ERRORS_MAX_RETRIES_DEFAULT = 30
INCLUDE_SCHEMA_CHANGES = "include.schema.changes"

# --- database endpoint (relational connectors) -------------------------------------------------
DATABASE_HOSTNAME = "database.hostname"
DATABASE_PORT = "database.port"
DATABASE_USER = "database.user"
DATABASE_PASSWORD = "database.password"
DATABASE_DBNAME = "database.dbname"
DATABASE_SERVER_ID = "database.server.id"

# --- schema history (binlog connectors, Informix) ----------------------------------------------
SCHEMA_HISTORY_BOOTSTRAP_SERVERS = "schema.history.internal.kafka.bootstrap.servers"
SCHEMA_HISTORY_TOPIC = "schema.history.internal.kafka.topic"

# --- PostgreSQL ---------------------------------------------------------------------------------
PLUGIN_NAME = "plugin.name"
PLUGIN_NAME_DEFAULT = "pgoutput"
SLOT_NAME = "slot.name"
PUBLICATION_NAME = "publication.name"
PUBLICATION_NAME_DEFAULT = "cdclake_pub"
PUBLICATION_AUTOCREATE_MODE = "publication.autocreate.mode"
PUBLICATION_AUTOCREATE_MODE_DEFAULT = "disabled"
HSTORE_HANDLING_MODE = "hstore.handling.mode"
INTERVAL_HANDLING_MODE = "interval.handling.mode"
MONEY_FRACTION_DIGITS = "money.fraction.digits"

# --- MongoDB ------------------------------------------------------------------------------------
MONGODB_CONNECTION_STRING = "mongodb.connection.string"

# --- signals and notifications -----------------------------------------------------------------
SIGNAL_DATA_COLLECTION = "signal.data.collection"
SIGNAL_ENABLED_CHANNELS = "signal.enabled.channels"
SIGNAL_KAFKA_TOPIC = "signal.kafka.topic"
SIGNAL_KAFKA_BOOTSTRAP_SERVERS = "signal.kafka.bootstrap.servers"
NOTIFICATION_ENABLED_CHANNELS = "notification.enabled.channels"
NOTIFICATION_SINK_TOPIC_NAME = "notification.sink.topic.name"
NOTIFICATION_CHANNEL_SINK = "sink"

# --- topic-name suffixes ------------------------------------------------------------------------
SCHEMA_HISTORY_TOPIC_SUFFIX = ".schema-history"
NOTIFICATION_TOPIC_SUFFIX = ".notifications"
SIGNAL_TOPIC_SUFFIX = "-signal"
TRANSACTION_TOPIC_SUFFIX = ".transaction"
HEARTBEAT_TOPIC_PREFIX = "__debezium-heartbeat."

KAFKA_BOOTSTRAP_SERVERS_DEFAULT = "127.0.0.1:9092"
