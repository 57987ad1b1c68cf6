"""Hook that sends Debezium signals through the source database (signal table) or the Kafka signal topic."""

from __future__ import annotations

import time
from typing import Any, Literal

from airflow.sdk import BaseHook

from cdclake.connectors import ConnectorKind, ConnectorSpec
from cdclake.databases import (
    DEFAULT_CONNECT_TIMEOUT_S,
    SourceConnection,
    load_database,
    open_database,
    resolve_connection,
)
from cdclake.exceptions import ConfigError, NotInstalledError
from cdclake.signals import (
    ExecuteSnapshot,
    Signal,
    checked_for_spec,
    kafka_signal_message,
    mongo_client,
    send_kafka_signal,
    send_mongo_signal,
    send_sql_signal,
    signal_insert,
)
from cdclake_airflow.connections import connection_defined

Channel = Literal["source", "kafka"]
CHANNELS: tuple[Channel, ...] = ("source", "kafka")
MONGO_CONN_TYPES = ("mongo", "mongodb")


class DebeziumSignalHook(BaseHook):
    """Send signals to the Debezium connector of one connector spec.

    The ``source`` channel inserts into the spec's signal table through the database connection
    (``postgres`` with psycopg, ``mysql``/``mariadb`` with PyMySQL, both through :mod:`cdclake.databases`;
    ``mongo`` with pymongo if installed; ``schema`` holds the database, ``login``/``password`` a user allowed
    to INSERT into the signal table). The ``kafka`` channel produces to ``<prefix>-signal`` through the
    apache-kafka provider's producer hook.

    Before sending, an ``execute-snapshot``'s filters are checked in the source's SQL dialect and regenerated
    (:func:`cdclake.signals.checked_for_spec`), against the filtered tables' columns when the reader connection
    ``<connection_id>_reader`` can read them (the signal writer may not see the tables).

    Args:
        spec: the connector spec.
        database_conn_id: the database connection (default: the spec's ``connection_id``).
        kafka_config_id: the Kafka connection used by the ``kafka`` channel.
    """

    conn_name_attr = "database_conn_id"
    default_conn_name = "debezium_signal_default"
    conn_type = "postgres"
    hook_name = "Debezium signal"

    def __init__(
        self,
        spec: ConnectorSpec,
        database_conn_id: str | None = None,
        kafka_config_id: str = "kafka_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.database_conn_id = database_conn_id or spec.connection_id
        self.kafka_config_id = kafka_config_id

    # ---- clients ---------------------------------------------------------------------------------

    def source_connection(self) -> SourceConnection:
        """The database connection as a :class:`~cdclake.databases.SourceConnection` (rendered with Airflow's
        ``Connection.get_uri()``; extras ``connect_timeout`` and ``statement_timeout`` in seconds).

        Raises:
            ConfigError: when the connection's type is unknown or it lacks a host or login.
        """
        conn = self.get_connection(self.database_conn_id)
        return resolve_connection(self.spec, uri=conn.get_uri(), origin=f"connection {self.database_conn_id}")

    def get_db_connection(self) -> Any:
        """Open a DB-API connection (autocommit, with connect and statement timeouts; :mod:`cdclake.databases`),
        or a MongoClient, from the database connection.

        Raises:
            NotInstalledError: for connection types without an installed driver (Informix, pymongo).
            ConfigError: for unsupported connection types (a ValueError).
            SourceDatabaseError: when the database cannot be reached.
        """
        conn = self.get_connection(self.database_conn_id)
        conn_type = (conn.conn_type or "").lower()
        if conn_type in MONGO_CONN_TYPES:
            timeout = int(conn.extra_dejson.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S))
            return mongo_client(conn.get_uri(), serverSelectionTimeoutMS=timeout * 1000)
        try:
            load_database(conn_type)
        except NotInstalledError as exc:
            raise NotInstalledError(
                f"connection {self.database_conn_id!r}: {exc}; send the signal through the Kafka channel "
                "(channel='kafka')"
            ) from exc
        except ConfigError as exc:
            raise ConfigError(f"connection {self.database_conn_id!r} has conn_type {conn.conn_type!r}: {exc}") from exc
        return open_database(self.source_connection(), utc=False).dbapi

    def get_producer(self) -> Any:
        """A confluent-kafka Producer from the apache-kafka provider's hook."""
        from airflow.providers.apache.kafka.hooks.produce import KafkaProducerHook

        return KafkaProducerHook(kafka_config_id=self.kafka_config_id).get_producer()

    def test_connection(self) -> tuple[bool, str]:
        """Open and close the database connection."""
        try:
            conn = self.get_db_connection()
            conn.close()
        except Exception as exc:
            return False, str(exc)
        return True, f"connected to {self.database_conn_id}"

    def filter_columns(self, signal: Signal) -> dict[str, list[str]] | None:
        """The columns of the tables an ``execute-snapshot`` filters, read through the reader connection
        ``<connection_id>_reader``; None (with a warning) when there is no SQL filter to check or the columns
        cannot be read (the connection is not defined, the driver is missing, the database cannot be reached).
        A table the reader cannot see is left out, with a warning."""
        if not isinstance(signal, ExecuteSnapshot) or not signal.additional_conditions:
            return None
        if self.spec.connector is ConnectorKind.MONGODB:
            return None  # MongoDB filters are not SQL
        conn_id = self.spec.reader_connection_id
        if not connection_defined(conn_id):
            self.log.warning(
                "Connection %s is not defined: the snapshot filters' column names are not checked against the tables",
                conn_id,
            )
            return None
        columns: dict[str, list[str]] = {}
        try:
            with open_database(DebeziumSignalHook(self.spec, database_conn_id=conn_id).source_connection()) as db:
                for cond in signal.additional_conditions:
                    namespace, _, table = cond.data_collection.rpartition(".")
                    names = db.columns(namespace, table)
                    if names:
                        columns[cond.data_collection] = names
                    else:
                        self.log.warning(
                            "%s shows no column of %s: its filter's column names are not checked",
                            conn_id,
                            cond.data_collection,
                        )
        except Exception as exc:  # a best effort: the filters' other checks do not need the columns
            self.log.warning("Cannot read the filtered tables' columns through %s (%s): not checked", conn_id, exc)
            return None
        return columns

    # ---- sending ---------------------------------------------------------------------------------

    def send(self, signal: Signal, channel: Channel = "source") -> int:
        """Check a signal for the spec and send it: its collections must be tables of the spec, and an
        ``execute-snapshot``'s filters are sent as regenerated in the source's dialect (:meth:`filter_columns`
        gives their column check).

        Returns:
            The epoch-ms time just before sending (use it to match blocking-snapshot notifications).

        Raises:
            SignalValidationError: when the signal names collections the spec does not capture, or a filter is
                refused (the message names its table and why).
            SignalDeliveryError: when the insert or produce fails.
            ValueError: for an unknown channel.
        """
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
        signal = checked_for_spec(signal, self.spec)  # before any connection: a refused filter opens none
        columns = self.filter_columns(signal)
        if columns:
            signal = checked_for_spec(signal, self.spec, columns)
        sent_at_ms = int(time.time() * 1000)
        self.log.info(
            "Sending %s signal %s to connector %s via %s", signal.type, signal.id, self.spec.connect_name, channel
        )
        if channel == "kafka":
            send_kafka_signal(self.get_producer(), kafka_signal_message(self.spec, signal))
            return sent_at_ms
        db = self.get_db_connection()
        try:
            if self.spec.connector is ConnectorKind.MONGODB:
                send_mongo_signal(db, self.spec.signal_table, signal)
            else:
                send_sql_signal(db, signal_insert(self.spec, signal))
        finally:
            db.close()
        return sent_at_ms
