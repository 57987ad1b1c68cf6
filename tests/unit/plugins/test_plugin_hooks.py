"""KafkaConnectHook and DebeziumSignalHook with env-var connections; our own methods are patched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from cdclake.connect import ConnectorStatus, KafkaConnectClient
from cdclake.connectors import load_spec
from cdclake.exceptions import (
    ConnectUnavailableError,
    NotInstalledError,
    SignalValidationError,
    SourceDatabaseError,
)
from cdclake.signals import PauseSnapshot, build_signal
from cdclake_airflow.hooks.debezium_notification import DebeziumNotificationHook
from cdclake_airflow.hooks.debezium_signal import DebeziumSignalHook
from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook
from cdclake_airflow.hooks.source_database import get_database_endpoint

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
GET_CONN_PATH = "cdclake_airflow.hooks.kafka_connect.KafkaConnectHook.get_conn"
SERVER_INFO_PATH = "cdclake_airflow.hooks.kafka_connect.KafkaConnectClient.server_info"
GET_DB_CONNECTION_PATH = "cdclake_airflow.hooks.debezium_signal.DebeziumSignalHook.get_db_connection"
GET_PRODUCER_PATH = "cdclake_airflow.hooks.debezium_signal.DebeziumSignalHook.get_producer"


def _conn(**fields: object) -> str:
    return json.dumps(fields)


def test_kafka_connect_hook_attributes() -> None:
    assert KafkaConnectHook.conn_name_attr == "kafka_connect_conn_id"
    assert KafkaConnectHook.default_conn_name == "kafka_connect_default"
    assert KafkaConnectHook.conn_type == "kafka_connect"
    assert KafkaConnectHook.hook_name == "Kafka Connect"


def test_get_conn_builds_client_from_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KC_AUTH",
        _conn(
            conn_type="kafka_connect",
            host="connect.test",
            port=8443,
            schema="https",
            login="admin",
            password="pw",
            extra={"timeout": 3, "retries": 5, "backoff_max_s": 1},
        ),
    )
    client = KafkaConnectHook("kc_auth").get_conn
    assert isinstance(client, KafkaConnectClient)
    assert client.base_url == "https://connect.test:8443"
    assert (client.timeout, client.retries, client.backoff_max_s) == (3.0, 5, 1.0)
    assert client._session.auth == ("admin", "pw")


def test_default_connection_and_lazy_client() -> None:
    hook = KafkaConnectHook()
    assert "get_conn" not in hook.__dict__  # nothing built in __init__
    client = hook.get_conn
    assert client.base_url == "http://connect.test:8083"
    assert client.timeout == (2.0, 10.0)
    assert hook.get_conn is client


def test_http_connection_with_scheme_in_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KC_HTTP", _conn(conn_type="http", host="http://localhost", port=8083))
    assert KafkaConnectHook("kc_http").get_conn.base_url == "http://localhost:8083"


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"conn_type": "postgres", "host": "h"}, "use one of kafka_connect, http"),
        ({"conn_type": "kafka_connect"}, "'host' must be provided"),
        ({"conn_type": "kafka_connect", "host": "h", "schema": "ftp"}, "schema must be http or https"),
        ({"conn_type": "kafka_connect", "host": "h", "extra": {"timeout": "soon"}}, "extra 'timeout'"),
    ],
)
def test_bad_connections_name_the_key(monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], match: str) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KC_BAD", json.dumps(fields))
    with pytest.raises(ValueError, match=match):
        KafkaConnectHook("kc_bad").get_conn  # noqa: B018


def test_test_connection() -> None:
    with mock.patch(SERVER_INFO_PATH, return_value={"version": "4.3.1", "kafka_cluster_id": "abc"}):
        assert KafkaConnectHook().test_connection() == (True, "Kafka Connect 4.3.1 (cluster abc)")
    with mock.patch(SERVER_INFO_PATH, side_effect=ConnectUnavailableError("Kafka Connect at x is unreachable")):
        ok, message = KafkaConnectHook().test_connection()
    assert not ok
    assert "unreachable" in message


def test_hook_delegates_to_client() -> None:
    client = mock.create_autospec(KafkaConnectClient, instance=True)
    with mock.patch(GET_CONN_PATH, new_callable=mock.PropertyMock, return_value=client):
        hook = KafkaConnectHook()
        hook.status("postgres")
        hook.restart("postgres", include_tasks=False)
        hook.create_or_update("postgres", {"a": "b"})
        hook.list_connectors(expand_status=True)
        hook.pause("postgres")
    client.status.assert_called_once_with("postgres")
    client.restart.assert_called_once_with("postgres", include_tasks=False, only_failed=True)
    client.create_or_update.assert_called_once_with("postgres", {"a": "b"})
    client.list_connectors.assert_called_once_with(expand_status=True)
    client.pause.assert_called_once_with("postgres")


def test_database_endpoint_from_connection() -> None:
    endpoint = get_database_endpoint("cdc_postgres")
    assert (endpoint.host, endpoint.port, endpoint.database) == ("127.0.0.1", 5433, "demo")


# ---- DebeziumSignalHook --------------------------------------------------------------------------


class _Cursor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        self.calls.append((sql, params))

    def close(self) -> None:
        pass


class _DbConn:
    def __init__(self) -> None:
        self.cur = _Cursor()
        self.committed = False
        self.closed = False

    def cursor(self) -> _Cursor:
        return self.cur

    def commit(self) -> None:
        self.committed = True

    def close(self) -> None:
        self.closed = True


def test_signal_hook_source_channel_postgres() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    db = _DbConn()
    signal = build_signal("execute-snapshot", id="sig-1", data_collections=["inventory.orders"])
    with mock.patch(GET_DB_CONNECTION_PATH, return_value=db):
        sent_at = DebeziumSignalHook(spec).send(signal)
    assert sent_at > 0
    [(sql, params)] = db.cur.calls
    assert sql == 'INSERT INTO "inventory"."debezium_signal" (id, type, data) VALUES (%s, %s, %s)'
    assert params[:2] == ("sig-1", "execute-snapshot")
    assert db.committed and db.closed


def test_signal_hook_rejects_unknown_collection_before_connecting() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    with mock.patch(GET_DB_CONNECTION_PATH) as get_db, pytest.raises(SignalValidationError, match="inventory.nope"):
        DebeziumSignalHook(spec).send(build_signal("execute-snapshot", data_collections=["inventory.nope"]))
    get_db.assert_not_called()


OPEN_DATABASE_PATH = "cdclake_airflow.hooks.debezium_signal.open_database"
READER_CONN = _conn(conn_type="postgres", host="127.0.0.1", port=5433, schema="demo", login="cdc_reader", password="r")


class _Reader:
    """A source database that shows some tables' columns."""

    def __init__(self, columns: dict[str, list[str]]) -> None:
        self.tables = columns

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def columns(self, namespace: str, table: str) -> list[str]:
        return self.tables.get(f"{namespace}.{table}", [])


def _filtered(filter_: str, snapshot_type: str = "incremental") -> Any:
    return build_signal(
        "execute-snapshot",
        id="sig-f",
        data_collections=["inventory.orders"],
        snapshot_type=snapshot_type,
        additional_conditions=[{"data-collection": "inventory.orders", "filter": filter_}],
    )


def _sent_filter(db: _DbConn) -> str:
    [(_, params)] = db.cur.calls
    return str(json.loads(params[2])["additional-conditions"][0]["filter"])


def test_signal_hook_refuses_hostile_filter_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_POSTGRES_READER", READER_CONN)
    spec = load_spec("postgres", SPEC_DIR)
    signal = _filtered("status = 'open'")
    hostile = signal.model_copy(
        update={"additional_conditions": (signal.additional_conditions[0].model_copy(update={"filter": "1=1; --"}),)}
    )  # a model built around validation: the hook checks what it sends itself
    with (
        mock.patch(GET_DB_CONNECTION_PATH) as get_db,
        mock.patch(OPEN_DATABASE_PATH) as open_db,
        pytest.raises(SignalValidationError, match="filter of inventory.orders: comments are not allowed"),
    ):
        DebeziumSignalHook(spec).send(hostile)
    get_db.assert_not_called()
    open_db.assert_not_called()


def test_signal_hook_checks_filter_columns_through_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_POSTGRES_READER", READER_CONN)
    spec = load_spec("postgres", SPEC_DIR)
    reader = _Reader({"inventory.orders": ["id", "status"]})
    db = _DbConn()
    with (
        mock.patch(OPEN_DATABASE_PATH, return_value=reader) as open_db,
        mock.patch(GET_DB_CONNECTION_PATH, return_value=db),
    ):
        DebeziumSignalHook(spec).send(_filtered("Status = 'open' OR id < 10"))
        with pytest.raises(SignalValidationError, match="secret is not a column of inventory.orders"):
            DebeziumSignalHook(spec).send(_filtered("SELECT * FROM inventory.orders WHERE secret > 0", "blocking"))
    assert open_db.call_args.args[0].user == "cdc_reader"
    assert _sent_filter(db) == '("status" = \'open\' OR "id" < 10)'


def _warnings(log: mock.Mock) -> str:
    return " ".join(call.args[0] % call.args[1:] for call in log.warning.call_args_list)


def test_signal_hook_without_reader_checks_filters_without_columns() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    db = _DbConn()
    with (
        mock.patch(OPEN_DATABASE_PATH) as open_db,
        mock.patch(GET_DB_CONNECTION_PATH, return_value=db),
        mock.patch.object(DebeziumSignalHook, "log", new_callable=mock.PropertyMock) as log,
    ):
        DebeziumSignalHook(spec).send(_filtered("secret = 1"))
    open_db.assert_not_called()
    assert _sent_filter(db) == '"secret" = 1'
    assert "Connection cdc_postgres_reader is not defined" in _warnings(log.return_value)


def test_signal_hook_unreadable_columns_are_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_POSTGRES_READER", READER_CONN)
    spec = load_spec("postgres", SPEC_DIR)
    db = _DbConn()
    with (
        mock.patch(OPEN_DATABASE_PATH, side_effect=SourceDatabaseError("cannot connect")),
        mock.patch(GET_DB_CONNECTION_PATH, return_value=db),
        mock.patch.object(DebeziumSignalHook, "log", new_callable=mock.PropertyMock) as log,
    ):
        DebeziumSignalHook(spec).send(_filtered("secret = 1"))
    assert _sent_filter(db) == '"secret" = 1'
    assert "Cannot read the filtered tables' columns through cdc_postgres_reader (cannot connect)" in _warnings(
        log.return_value
    )


def test_signal_hook_kafka_channel() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    producer = mock.Mock()
    producer.flush.return_value = 0
    with mock.patch(GET_PRODUCER_PATH, return_value=producer):
        DebeziumSignalHook(spec).send(PauseSnapshot(id="p1"), channel="kafka")
    args, kwargs = producer.produce.call_args
    assert args == ("pg-signal",)
    assert kwargs["key"] == b"pg"
    assert json.loads(kwargs["value"]) == {"id": "p1", "type": "pause-snapshot", "data": {}}


def test_signal_hook_bad_channel() -> None:
    with pytest.raises(ValueError, match="channel must be one of source, kafka"):
        DebeziumSignalHook(load_spec("postgres", SPEC_DIR)).send(PauseSnapshot(), channel="jmx")  # type: ignore[arg-type]


def test_postgres_connection_fields_map_to_psycopg() -> None:
    hook = DebeziumSignalHook(load_spec("postgres", SPEC_DIR))
    with mock.patch("psycopg.connect") as connect:
        assert hook.get_db_connection() is connect.return_value
    connect.assert_called_once_with(
        host="127.0.0.1",
        port=5433,
        dbname="demo",
        user="cdc_signal",
        password="pw",
        connect_timeout=10,
        autocommit=True,
        options="-c statement_timeout=600000",  # the server's time zone: no TimeZone option for a writer
    )


def test_mysql_connection_fields_map_to_pymysql() -> None:
    hook = DebeziumSignalHook(load_spec("mariadb", SPEC_DIR))
    with mock.patch("pymysql.connect") as connect:
        assert hook.get_db_connection() is connect.return_value
    kwargs = connect.call_args.kwargs
    assert {k: kwargs[k] for k in ("host", "port", "database", "user", "password", "connect_timeout")} == {
        "host": "127.0.0.1",
        "port": 3307,
        "database": "demo",
        "user": "cdc_signal",
        "password": "pw",
        "connect_timeout": 10,
    }
    assert kwargs["read_timeout"] == 610  # the statement timeout plus the connect timeout


def test_connection_extras_set_the_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_POSTGRES_READER",
        _conn(
            conn_type="postgres",
            host="db.test",
            login="cdc_reader",
            password="p@ss:/",
            extra={"connect_timeout": 3, "statement_timeout": 30},
        ),
    )
    source = DebeziumSignalHook(
        load_spec("postgres", SPEC_DIR), database_conn_id="cdc_postgres_reader"
    ).source_connection()
    assert (source.dialect, source.host, source.port, source.user, source.password, source.database) == (
        "postgresql",
        "db.test",
        5432,
        "cdc_reader",
        "p@ss:/",
        "demo",  # the spec's database: the connection has no schema
    )
    assert (source.connect_timeout_s, source.statement_timeout_s, source.origin) == (
        3,
        30,
        "connection cdc_postgres_reader",
    )


def test_unknown_connection_type_names_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_POSTGRES", _conn(conn_type="oracle", host="ora", login="u"))
    with pytest.raises(ValueError, match="connection 'cdc_postgres' has conn_type 'oracle'"):
        DebeziumSignalHook(load_spec("postgres", SPEC_DIR)).get_db_connection()


def test_informix_source_channel_needs_a_driver() -> None:
    hook = DebeziumSignalHook(load_spec("informix", SPEC_DIR))
    with pytest.raises(NotInstalledError, match="channel='kafka'"):
        hook.get_db_connection()


def test_notification_hook_consumer_config() -> None:
    hook = DebeziumNotificationHook(topic="pg.notifications", group_id="g1")
    with mock.patch("cdclake_airflow.hooks.debezium_notification.Consumer") as consumer_cls:
        consumer = hook.get_consumer()
    config = consumer_cls.call_args.args[0]
    assert config["bootstrap.servers"] == "127.0.0.1:9092"
    assert (config["group.id"], config["auto.offset.reset"], config["enable.auto.commit"]) == ("g1", "earliest", False)
    consumer.subscribe.assert_called_once_with(["pg.notifications"])


def test_status_model_used_by_hook_is_typed() -> None:
    client = mock.create_autospec(KafkaConnectClient, instance=True)
    client.status.return_value = ConnectorStatus.model_validate(
        {"name": "pg", "connector": {"state": "RUNNING"}, "tasks": [{"id": 0, "state": "RUNNING"}]}
    )
    with mock.patch(GET_CONN_PATH, new_callable=mock.PropertyMock, return_value=client):
        assert KafkaConnectHook().status("pg").is_running
