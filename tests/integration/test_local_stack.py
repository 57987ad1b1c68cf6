"""The local stack's services answer like their clients expect, with the settings Debezium needs."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable

import pymysql
import pytest
import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cdclake.stack import Stack
from cdclake.stack.config import password
from cdclake.stack.connect import DEBEZIUM_CONNECTOR_CLASSES

pytestmark = pytest.mark.integration("stack")


def test_kafka_produce_and_consume_round_trip(kafka_bootstrap: str) -> None:
    topic = f"it-roundtrip-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: dict[int, list[tuple[int, bytes, bytes]]] = {0: [], 1: []}
    try:
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
            if sum(len(v) for v in got.values()) == 10:
                break
    finally:
        consumer.close()
    assert got[0] == [(n, f"k{2 * n}".encode(), f"v{2 * n}".encode()) for n in range(5)]
    assert got[1] == [(n, f"k{2 * n + 1}".encode(), f"v{2 * n + 1}".encode()) for n in range(5)]
    metadata = admin.list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 2
    assert [b.id for b in metadata.brokers.values()] == [1]


def test_connect_lists_every_debezium_connector(connect_url: str, connect_auth: tuple[str, str]) -> None:
    plugins = requests.get(f"{connect_url}/connector-plugins", timeout=10, auth=connect_auth).json()
    by_class = {p["class"]: p for p in plugins}
    for cls in DEBEZIUM_CONNECTOR_CLASSES:
        assert cls in by_class, f"{cls} missing from {sorted(by_class)}"
        assert by_class[cls]["type"] == "source"
        assert by_class[cls]["version"].startswith("3.5.0")


def test_connect_rest_api_asks_for_the_stacks_credentials(connect_url: str, connect_auth: tuple[str, str]) -> None:
    user, secret = connect_auth
    for path in ("/", "/connectors", "/connector-plugins"):
        assert requests.get(connect_url + path, timeout=10).status_code == 401, path
        assert requests.get(connect_url + path, timeout=10, auth=(user, secret + "x")).status_code == 401, path
        assert requests.get(connect_url + path, timeout=10, auth=("admin", secret)).status_code == 401, path
        assert requests.get(connect_url + path, timeout=10, auth=connect_auth).status_code == 200, path
    # a write without credentials is refused before anything happens
    put = requests.put(f"{connect_url}/connectors/it-anonymous/config", json={}, timeout=10)
    assert put.status_code == 401
    assert requests.get(f"{connect_url}/connectors", timeout=10, auth=connect_auth).json().count("it-anonymous") == 0


def test_connect_worker_environment_holds_only_the_capture_passwords(stack: Stack) -> None:
    """Read from the running worker's /proc/<pid>/environ: no superuser, reader, signal or Airflow secret."""
    service = stack.service("connect")
    pid = service.process.pid()
    assert pid is not None
    environ = dict(
        item.split("=", 1) for item in open(f"/proc/{pid}/environ", "rb").read().decode().split("\0") if "=" in item
    )
    secrets = stack.secrets
    held = sorted(name for name, value in secrets.items() if value in environ.values())
    assert held == ["CDC_MARIADB_DEBEZIUM_PASSWORD", "CDC_POSTGRES_DEBEZIUM_PASSWORD"]
    assert not any(name.startswith(("AIRFLOW", "PYICEBERG", "CDC_LAKE")) for name in environ), sorted(environ)
    # the REST API's credentials file is the worker's own and private
    assert oct(service.credentials_file.stat().st_mode & 0o777) == "0o600"


Validate = Callable[[str, dict[str, str]], dict[str, list[str]]]


@pytest.fixture
def validate(connect_url: str, connect_auth: tuple[str, str]) -> Validate:
    """``validate(connector class, config)``: Connect's validation errors by config key."""
    return functools.partial(_validate, connect_url, connect_auth)


def _validate(connect_url: str, auth: tuple[str, str], cls: str, config: dict[str, str]) -> dict[str, list[str]]:
    response = requests.put(
        f"{connect_url}/connector-plugins/{cls}/config/validate",
        json={"connector.class": cls, "name": f"validate-{cls.rsplit('.', 1)[-1]}", **config},
        timeout=60,
        auth=auth,
    )
    response.raise_for_status()
    body = response.json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
    assert body["error_count"] == sum(len(v) for v in errors.values())
    return errors


def test_connect_validates_postgres_connector_config(stack: Stack, validate: Validate) -> None:
    config = {
        "topic.prefix": "itpg",
        "database.hostname": stack.config.host,
        "database.port": str(stack.config.postgres_port),
        "database.user": "debezium",
        # resolved by the worker's env config provider; the secret never appears in the config
        "database.password": "${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}",
        "database.dbname": "demo",
        "plugin.name": "pgoutput",
        "publication.name": "cdclake_pub",
        "publication.autocreate.mode": "disabled",
        "schema.include.list": "inventory",
    }
    assert validate("io.debezium.connector.postgresql.PostgresConnector", config) == {}
    wrong = validate("io.debezium.connector.postgresql.PostgresConnector", {**config, "database.password": "not-it"})
    assert "database.password" in wrong or "database.hostname" in wrong or "database.user" in wrong, wrong


def test_connect_validates_mariadb_connector_config(stack: Stack, validate: Validate, kafka_bootstrap: str) -> None:
    config = {
        "topic.prefix": "itmaria",
        "database.hostname": stack.config.host,
        "database.port": str(stack.config.mariadb_port),
        "database.user": "debezium",
        "database.password": "${env:CDC_MARIADB_DEBEZIUM_PASSWORD}",
        "database.server.id": "5401",
        "database.include.list": "demo",
        "schema.history.internal.kafka.bootstrap.servers": kafka_bootstrap,
        "schema.history.internal.kafka.topic": "itmaria.schema-history",
    }
    assert validate("io.debezium.connector.mariadb.MariaDbConnector", config) == {}
    missing = validate(
        "io.debezium.connector.mariadb.MariaDbConnector",
        {k: v for k, v in config.items() if k != "topic.prefix"},
    )
    assert "topic.prefix" in missing


def test_postgres_users_and_logical_replication(stack: Stack) -> None:
    pg = stack.service("postgres")
    with pg.connect("admin") as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('wal_level','max_replication_slots','max_wal_senders')"
            ).fetchall()
        )
        assert settings == {"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}
        roles = {
            r[0]: (r[1], r[2])
            for r in conn.execute(
                "SELECT rolname, rolreplication, rolsuper FROM pg_roles WHERE rolname IN ('debezium','cdc_signal','cdclake_app')"
            ).fetchall()
        }
        assert roles == {"debezium": (True, False), "cdc_signal": (False, False), "cdclake_app": (False, False)}
    with pg.connect("app", dbname="demo") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS inventory.it_probe (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO inventory.it_probe VALUES (1, 'x') ON CONFLICT DO NOTHING")
    with pg.connect("debezium", dbname="demo") as conn:
        # default privileges: the capture role reads tables created later by the app
        assert conn.execute("SELECT v FROM inventory.it_probe WHERE id = 1").fetchone() == ("x",)
        assert conn.execute("SELECT pubname, puballtables FROM pg_publication").fetchall() == [("cdclake_pub", True)]
    with pg.connect("signal", dbname="demo") as conn:
        signal_id = uuid.uuid4().hex
        conn.execute(
            "INSERT INTO inventory.debezium_signal (id, type, data) VALUES (%s, %s, %s)",
            [signal_id, "log", '{"message":"x"}'],
        )
        import psycopg

        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM inventory.it_probe")


def test_mariadb_users_binlog_and_grants(stack: Stack) -> None:
    db = stack.service("mariadb")
    with db.connect("admin") as conn, conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
            "('log_bin','binlog_format','binlog_row_image','server_id','gtid_strict_mode','time_zone')"
        )
        assert dict(cur.fetchall()) == {
            "log_bin": "ON",
            "binlog_format": "ROW",
            "binlog_row_image": "FULL",
            "server_id": "184054",
            "gtid_strict_mode": "ON",
            "time_zone": "+00:00",
        }
        cur.execute("SELECT @@gtid_domain_id, @@gtid_binlog_pos IS NOT NULL")
        assert cur.fetchone() == (0, 1)
    with db.connect("debezium") as conn, conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER")
        grants = sorted(row[0].split(" IDENTIFIED")[0] for row in cur.fetchall())
        assert grants == [
            "GRANT INSERT ON `demo`.`debezium_signal` TO `debezium`@`127.0.0.1`",
            "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `debezium`@`127.0.0.1`",
        ]
        cur.execute("SHOW MASTER STATUS")
        assert cur.fetchone()[0].startswith("mariadb-bin.")
    with db.connect("signal", database="demo") as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO debezium_signal (id, type, data) VALUES (%s, %s, %s)",
            (uuid.uuid4().hex, "log", '{"message":"x"}'),
        )
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("CREATE TABLE nope (id int)")
    with db.connect("app", database="demo") as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) >= 1 FROM debezium_signal")
        assert cur.fetchone() == (1,)
    # every user authenticates with its generated password, and only with it
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host=stack.config.host, port=stack.config.mariadb_port, user="debezium", password="wrong")
    assert password(stack.secrets, "mariadb", "debezium") != password(stack.secrets, "mariadb", "signal")
