"""Signal channels: SQL signal-table inserts, MongoDB signal documents, and the Kafka signal topic.

Builders are pure (SQL text + bound parameters, documents, Kafka messages). Senders take a live
connection or client created by the caller (an Airflow hook), so this module opens no connections
itself. Values are always bound as parameters, never spliced into the SQL text.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from cdclake.connectors.spec import ConnectorKind, ConnectorSpec
from cdclake.exceptions import NotInstalledError, SignalDeliveryError, SignalValidationError
from cdclake.signals.models import Signal, SignalRecord, checked_for_spec
from cdclake.sql import quote_name

logger = logging.getLogger(__name__)

SIGNAL_COLUMNS = ("id", "type", "data")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


class SqlDialect(StrEnum):
    """How a signal-table INSERT is spelled (identifier quoting and placeholder style)."""

    POSTGRESQL = "postgresql"  # psycopg, %s placeholders, "double" quotes
    MYSQL = "mysql"  # PyMySQL (MySQL and MariaDB), %s placeholders, `backticks`
    INFORMIX = "informix"  # DB-API qmark (?) placeholders; unquoted owner.table (no DELIMIDENT)


SQL_DIALECTS: dict[ConnectorKind, SqlDialect] = {
    ConnectorKind.POSTGRESQL: SqlDialect.POSTGRESQL,
    ConnectorKind.MYSQL: SqlDialect.MYSQL,
    ConnectorKind.MARIADB: SqlDialect.MYSQL,
    ConnectorKind.INFORMIX: SqlDialect.INFORMIX,
}


@dataclass(frozen=True)
class SqlStatement:
    """SQL text with placeholders plus the parameters bound to them."""

    sql: str
    params: tuple[Any, ...]


def _check_identifier(part: str, table: str) -> str:
    if not _IDENTIFIER.match(part):
        raise SignalValidationError(f"signal table {table!r}: {part!r} is not a plain SQL identifier")
    return part


def build_signal_insert(dialect: SqlDialect, table: str, record: SignalRecord) -> SqlStatement:
    """``INSERT INTO <table> (id, type, data) VALUES (<placeholders>)`` with the record as parameters.

    Args:
        dialect: SQL spelling.
        table: the signal table as a Debezium data collection (``schema.table``, ``db.table``,
            ``db.owner.table``); Informix drops the database part (the connection selects it).
        record: the signal-table row.

    Raises:
        SignalValidationError: when the table name is not made of plain identifiers.
    """
    parts = [_check_identifier(part, table) for part in table.split(".")]
    columns = ", ".join(SIGNAL_COLUMNS)
    if dialect is SqlDialect.POSTGRESQL:
        target = ".".join(f'"{part}"' for part in parts)
        placeholders = "%s, %s, %s"
    elif dialect is SqlDialect.MYSQL:
        target = quote_name(parts)
        placeholders = "%s, %s, %s"
    else:
        target = ".".join(parts[-2:])
        placeholders = "?, ?, ?"
    sql = f"INSERT INTO {target} ({columns}) VALUES ({placeholders})"
    return SqlStatement(sql=sql, params=(record.id, record.type, record.data))


def signal_insert(spec: ConnectorSpec, signal: Signal) -> SqlStatement:
    """The signal-table INSERT for a spec's connector, the signal checked for the spec first
    (:func:`~cdclake.signals.models.checked_for_spec`: its filters are sent as regenerated in the spec's dialect).

    Raises:
        SignalValidationError: for MongoDB (use :func:`mongo_signal_document`), a bad table name, a collection the
            spec does not capture or a refused filter.
    """
    dialect = SQL_DIALECTS.get(spec.connector)
    if dialect is None:
        raise SignalValidationError(
            f"{spec.describe()}: the {spec.connector} connector has no SQL signal table; use mongo_signal_document()"
        )
    return build_signal_insert(dialect, spec.signal_table, checked_for_spec(signal, spec).to_record())


class DbApiConnection(Protocol):
    """The part of a DB-API 2.0 connection the SQL sender uses."""

    def cursor(self) -> Any: ...

    def commit(self) -> None: ...


def send_sql_signal(connection: DbApiConnection, statement: SqlStatement) -> None:
    """Execute a signal INSERT on an open DB-API connection and commit.

    Raises:
        SignalDeliveryError: when the database rejects the insert (the cause is chained).
    """
    cursor = connection.cursor()
    try:
        cursor.execute(statement.sql, statement.params)
        connection.commit()
    except Exception as exc:
        raise SignalDeliveryError(f"could not insert signal {statement.params[0]}: {exc}") from exc
    finally:
        cursor.close()
    logger.info("Inserted signal id=%s type=%s", statement.params[0], statement.params[1])


# ---- MongoDB ------------------------------------------------------------------------------------


def mongo_signal_document(signal: Signal) -> dict[str, Any]:
    """The document to ``insert_one`` into a MongoDB signal collection.

    ``_id`` is the signal id; ``data`` is the data object as a sub-document (omitted when empty).
    """
    document: dict[str, Any] = {"_id": signal.id, "type": signal.type}
    data = signal.data()
    if data is not None:
        document["data"] = data
    return document


def mongo_client(uri: str, **kwargs: Any) -> Any:
    """Create a ``pymongo.MongoClient`` (pymongo is an optional dependency).

    Raises:
        NotInstalledError: when pymongo is not installed.
    """
    try:
        import pymongo
    except ImportError as exc:
        raise NotInstalledError(
            "sending MongoDB signals needs pymongo: pip install 'pymongo>=4' (or use the Kafka signal channel)"
        ) from exc
    return pymongo.MongoClient(uri, **kwargs)


def send_mongo_signal(client: Any, signal_collection: str, signal: Signal) -> None:
    """Insert a signal document into ``<db>.<collection>`` through a MongoClient.

    Raises:
        SignalDeliveryError: when the insert fails.
    """
    database, _, collection = signal_collection.partition(".")
    if not database or not collection:
        raise SignalValidationError(f"signal collection {signal_collection!r} must be database.collection")
    try:
        client[database][collection].insert_one(mongo_signal_document(signal))
    except Exception as exc:
        raise SignalDeliveryError(f"could not insert signal {signal.id} into {signal_collection}: {exc}") from exc
    logger.info("Inserted signal id=%s type=%s into %s", signal.id, signal.type, signal_collection)


# ---- Kafka --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaSignalMessage:
    """A record for the Kafka signal channel: key = ``topic.prefix``, value = ``{id, type, data}`` JSON."""

    topic: str
    key: str
    value: bytes

    def value_json(self) -> dict[str, Any]:
        """The decoded value."""
        decoded: dict[str, Any] = json.loads(self.value)
        return decoded


def kafka_signal_message(spec: ConnectorSpec, signal: Signal, topic: str | None = None) -> KafkaSignalMessage:
    """Build the Kafka signal record for a spec (topic default ``spec.signal_topic``, ``<prefix>-signal``), the
    signal checked for the spec first (:func:`~cdclake.signals.models.checked_for_spec`).

    Raises:
        SignalValidationError: for a collection the spec does not capture or a refused filter.
    """
    signal = checked_for_spec(signal, spec)
    value = {"id": signal.id, "type": signal.type, "data": signal.data() or {}}
    return KafkaSignalMessage(
        topic=topic or spec.signal_topic,
        key=spec.topic_prefix,
        value=json.dumps(value, separators=(",", ":")).encode("utf-8"),
    )


class KafkaProducerLike(Protocol):
    """The part of ``confluent_kafka.Producer`` the Kafka sender uses."""

    def produce(self, topic: str, value: Any = ..., key: Any = ..., on_delivery: Callable[..., Any] = ...) -> None: ...

    def flush(self, timeout: float = ...) -> int: ...


def send_kafka_signal(producer: KafkaProducerLike, message: KafkaSignalMessage, timeout_s: float = 30.0) -> None:
    """Produce a signal record and wait for its delivery.

    Raises:
        SignalDeliveryError: when the broker reports an error or delivery does not finish in time.
    """
    errors: list[str] = []
    coords: list[tuple[int, int]] = []

    def _on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            coords.append((msg.partition(), msg.offset()))

    try:
        producer.produce(message.topic, value=message.value, key=message.key.encode("utf-8"), on_delivery=_on_delivery)
        remaining = producer.flush(timeout_s)
    except Exception as exc:  # BufferError, KafkaException
        raise SignalDeliveryError(f"could not produce signal to topic {message.topic}: {exc}") from exc
    if errors:
        raise SignalDeliveryError(f"signal delivery to topic {message.topic} failed: {errors[0]}")
    if remaining:
        raise SignalDeliveryError(f"signal to topic {message.topic} not delivered within {timeout_s}s")
    for partition, offset in coords:
        logger.info("Produced signal to topic %s, partition [%s] @ offset %s", message.topic, partition, offset)
