"""Kafka Connect JSON generation: exact configs for postgres and mariadb, key properties for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdclake.connectors import DatabaseEndpoint, connect_config, derive_server_id, load_spec, parse_spec
from cdclake.exceptions import ConnectorSpecError

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
JSON = "org.apache.kafka.connect.json.JsonConverter"


def test_postgres_config_exact() -> None:
    spec = load_spec("postgres", SPEC_DIR)

    config = connect_config(spec, DatabaseEndpoint(host="127.0.0.1", port=5433, database="ignored"))

    assert config == {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "topic.prefix": "pg",
        "database.hostname": "127.0.0.1",
        "database.port": "5433",
        "database.user": "debezium",
        "database.password": "${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}",
        "database.dbname": "demo",
        "plugin.name": "pgoutput",
        "slot.name": "cdclake_postgres",
        "publication.name": "cdclake_pub",
        "publication.autocreate.mode": "disabled",
        "schema.include.list": "inventory",
        "table.include.list": (
            r"inventory\.customers,inventory\.orders,inventory\.products,inventory\.order_items,"
            r"inventory\.all_types,inventory\.debezium_signal"
        ),
        "snapshot.mode": "initial",
        "signal.data.collection": "inventory.debezium_signal",
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.topic": "pg-signal",
        "signal.kafka.bootstrap.servers": "127.0.0.1:9092",
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": "pg.notifications",
        "provide.transaction.metadata": "true",
        "heartbeat.interval.ms": "10000",
        "poll.interval.ms": "100",
        "errors.max.retries": "30",
        "tombstones.on.delete": "true",
        "skipped.operations": "none",
        "decimal.handling.mode": "precise",
        "time.precision.mode": "adaptive_time_microseconds",
        "key.converter": JSON,
        "key.converter.schemas.enable": "true",
        "value.converter": JSON,
        "value.converter.schemas.enable": "true",
    }


def test_mariadb_config_exact() -> None:
    spec = load_spec("mariadb", SPEC_DIR)

    config = connect_config(spec, DatabaseEndpoint(host="127.0.0.1", port=3307))

    assert config == {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "tasks.max": "1",
        "topic.prefix": "maria",
        "database.hostname": "127.0.0.1",
        "database.port": "3307",
        "database.user": "debezium",
        "database.password": "${env:CDC_MARIADB_DEBEZIUM_PASSWORD}",
        "database.server.id": str(derive_server_id("mariadb")),
        "database.include.list": "demo",
        "table.include.list": (
            r"demo\.customers,demo\.orders,demo\.products,demo\.order_items,demo\.all_types,demo\.debezium_signal"
        ),
        "snapshot.mode": "initial",
        "schema.history.internal.kafka.bootstrap.servers": "127.0.0.1:9092",
        "schema.history.internal.kafka.topic": "maria.schema-history",
        "include.schema.changes": "true",
        "signal.data.collection": "demo.debezium_signal",
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.topic": "maria-signal",
        "signal.kafka.bootstrap.servers": "127.0.0.1:9092",
        "notification.enabled.channels": "sink",
        "notification.sink.topic.name": "maria.notifications",
        "provide.transaction.metadata": "true",
        "heartbeat.interval.ms": "10000",
        "poll.interval.ms": "100",
        "errors.max.retries": "30",
        "tombstones.on.delete": "true",
        "skipped.operations": "none",
        "decimal.handling.mode": "precise",
        "time.precision.mode": "adaptive_time_microseconds",
        "bigint.unsigned.handling.mode": "precise",
        "key.converter": JSON,
        "key.converter.schemas.enable": "true",
        "value.converter": JSON,
        "value.converter.schemas.enable": "true",
    }


def test_server_id_is_deterministic_and_distinct_from_the_stack_server() -> None:
    assert derive_server_id("mariadb") == derive_server_id("mariadb")
    assert derive_server_id("mariadb") != derive_server_id("mysql")
    assert 100_000 <= derive_server_id("mariadb") <= 999_999
    assert derive_server_id("mariadb") != 184054  # the local MariaDB's own server_id


def test_mysql_key_properties() -> None:
    config = connect_config(load_spec("mysql", SPEC_DIR), DatabaseEndpoint(host="mysql"))
    assert config["connector.class"] == "io.debezium.connector.mysql.MySqlConnector"
    assert config["database.port"] == "3306"
    assert config["database.include.list"] == "demo"
    assert config["table.include.list"].endswith(r"demo\.debezium_signal")
    assert config["schema.history.internal.kafka.bootstrap.servers"] == "kafka:9092"
    assert config["schema.history.internal.kafka.topic"] == "mysql.schema-history"
    assert config["time.precision.mode"] == "adaptive_time_microseconds"
    assert "database.history.kafka.topic" not in config  # Debezium 1.x name


def test_mongodb_key_properties() -> None:
    config = connect_config(load_spec("mongodb", SPEC_DIR), DatabaseEndpoint(host="mongo", port=27017))
    assert config["connector.class"] == "io.debezium.connector.mongodb.MongoDbConnector"
    assert config["mongodb.connection.string"] == (
        "mongodb://debezium:${env:CDC_MONGODB_DEBEZIUM_PASSWORD}@mongo:27017/?authSource=admin&replicaSet=rs0"
    )
    assert config["database.include.list"] == "demo"
    assert config["collection.include.list"] == r"demo\.customers,demo\.orders,demo\.debezium_signal"
    assert config["signal.data.collection"] == "demo.debezium_signal"
    for absent in (
        "table.include.list",
        "database.hostname",
        "schema.history.internal.kafka.topic",
        "time.precision.mode",
        "decimal.handling.mode",
        "database.password",
    ):
        assert absent not in config


def test_informix_key_properties() -> None:
    config = connect_config(load_spec("informix", SPEC_DIR), DatabaseEndpoint(host="ifx"))
    assert config["connector.class"] == "io.debezium.connector.informix.InformixConnector"
    assert config["database.port"] == "9088"
    assert config["database.dbname"] == "demo"
    assert config["table.include.list"] == (
        r"demo\.informix\.customers,demo\.informix\.orders,demo\.informix\.debezium_signal"
    )
    assert config["signal.data.collection"] == "demo.informix.debezium_signal"
    assert config["time.precision.mode"] == "adaptive"  # Informix has no adaptive_time_microseconds
    assert config["schema.history.internal.kafka.topic"] == "ifx.schema-history"


def _minimal(**changes: object) -> dict[str, object]:
    raw: dict[str, object] = {
        "name": "pg2",
        "connector": "postgresql",
        "connection_id": "c",
        "capture_user": "u",
        "capture_password": "${env:P}",
        "topic_prefix": "p2",
        "database": "demo",
        "tables": ["s.t"],
        "signal_table": "s.sig",
    }
    raw.update(changes)
    return raw


def test_optional_features_off() -> None:
    spec = parse_spec(
        _minimal(
            signal_channels=["source"],
            notifications=False,
            transaction_metadata=False,
            heartbeat_interval_ms=0,
            converters={"key_schemas_enable": False, "value_schemas_enable": False},
        )
    )
    config = connect_config(spec, DatabaseEndpoint(host="h"))
    assert config["signal.enabled.channels"] == "source"
    assert "signal.kafka.topic" not in config
    assert "notification.enabled.channels" not in config
    assert config["provide.transaction.metadata"] == "false"
    assert config["heartbeat.interval.ms"] == "0"
    assert config["key.converter.schemas.enable"] == "false"
    assert config["value.converter.schemas.enable"] == "false"


def test_extra_is_applied_last_and_stringified() -> None:
    spec = parse_spec(
        _minimal(
            extra={"incremental.snapshot.chunk.size": 2048, "snapshot.mode": "no_data", "read.only": False},
            extra_overrides=["snapshot.mode"],
        )
    )
    config = connect_config(spec, DatabaseEndpoint(host="h"))
    assert config["incremental.snapshot.chunk.size"] == "2048"
    assert config["snapshot.mode"] == "no_data"
    assert config["read.only"] == "false"


def test_signal_table_is_captured_even_in_other_schema() -> None:
    config = connect_config(parse_spec(_minimal(signal_table="ops.sig")), DatabaseEndpoint(host="h"))
    assert config["schema.include.list"] == "s,ops"
    assert config["table.include.list"] == r"s\.t,ops\.sig"


def test_custom_slot_publication_and_server_id() -> None:
    pg = parse_spec(_minimal(slot_name="my_slot", publication_name="my_pub"))
    assert connect_config(pg, DatabaseEndpoint(host="h"))["slot.name"] == "my_slot"
    assert connect_config(pg, DatabaseEndpoint(host="h"))["publication.name"] == "my_pub"
    my = parse_spec(_minimal(connector="mysql", tables=["demo.t"], signal_table="demo.sig", server_id=4242))
    assert connect_config(my, DatabaseEndpoint(host="h"))["database.server.id"] == "4242"


def test_empty_database_is_rejected_by_the_model() -> None:
    with pytest.raises(ConnectorSpecError, match="database: String should have at least 1 character"):
        parse_spec(_minimal(database=""))
