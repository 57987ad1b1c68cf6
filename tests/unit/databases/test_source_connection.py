"""Where a source database is: parsing URIs and Airflow connections, resolving a spec's connection (no database)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest

import cdclake.databases.connection as connection_module
from cdclake.connectors import load_spec
from cdclake.databases import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_STATEMENT_TIMEOUT_S,
    SourceConnection,
    connection_env,
    load_database,
    parse_connection,
    reader_connection_env,
    resolve_connection,
    stack_connection,
)
from cdclake.exceptions import ConfigError
from cdclake.stack import StackConfig


def test_connection_env_follows_the_specs_connection_id() -> None:
    assert reader_connection_env(load_spec("postgres")) == "AIRFLOW_CONN_CDC_POSTGRES_READER"
    assert reader_connection_env(load_spec("mariadb")) == "AIRFLOW_CONN_CDC_MARIADB_READER"
    assert connection_env(load_spec("postgres"), "writer") == "AIRFLOW_CONN_CDC_POSTGRES"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            json.dumps(
                {
                    "conn_type": "postgres",
                    "host": "db",
                    "port": 5433,
                    "login": "app",
                    "password": "s3",
                    "schema": "shop",
                }
            ),
            ("postgresql", "db", 5433, "app", "s3", "shop"),
        ),
        ("postgresql://app:p%40ss@db:6543/shop", ("postgresql", "db", 6543, "app", "p@ss", "shop")),
        ("mysql://app:pw@maria/", ("mysql", "maria", 3306, "app", "pw", "demo")),  # database from the spec
        ("mariadb://app@maria:3307", ("mariadb", "maria", 3307, "app", "", "demo")),
    ],
)
def test_parse_connection(value: str, expected: tuple[object, ...]) -> None:
    conn = parse_connection(value, default_database="demo", origin="test")
    assert (conn.dialect, conn.host, conn.port, conn.user, conn.password, conn.database) == expected
    assert conn.password not in repr(conn) or not conn.password
    assert "(test)" in conn.describe()
    assert (conn.connect_timeout_s, conn.statement_timeout_s) == (
        DEFAULT_CONNECT_TIMEOUT_S,
        DEFAULT_STATEMENT_TIMEOUT_S,
    )


def test_mysql_and_mariadb_are_read_by_the_same_implementation() -> None:
    assert load_database("mariadb") is load_database("mysql")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("oracle://u:p@h/db", "connection type 'oracle'"),
        ("{not json", "not valid JSON"),
        ("postgres:///db", "host"),
        ("postgres://u@h/db?statement_timeout=soon", "statement_timeout='soon' is not a number of seconds"),
        ("postgres://u@h:99999/db", "Port out of range"),
    ],
)
def test_parse_connection_errors_name_the_origin(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_connection(value, default_database="demo", origin="AIRFLOW_CONN_X_READER")
    assert "AIRFLOW_CONN_X_READER" in str(info.value)


def test_timeouts_from_the_uri_query_and_airflow_extras() -> None:
    uri = parse_connection(
        "postgres://u:p@h/db?connect_timeout=3&statement_timeout=1.5", default_database="d", origin="t"
    )
    assert (uri.connect_timeout_s, uri.statement_timeout_s) == (3, 1.5)
    # what Airflow's Connection.get_uri() renders when an extra is not a string
    extra = urlencode({"__extra__": json.dumps({"connect_timeout": 4, "statement_timeout": 0})})
    airflow = parse_connection(f"mysql://u:p@h:1/db?{extra}", default_database="d", origin="t")
    assert (airflow.connect_timeout_s, airflow.statement_timeout_s) == (4, 0)
    as_json = json.dumps({"conn_type": "mysql", "host": "h", "login": "u", "extra": {"statement_timeout": 30}})
    assert parse_connection(as_json, default_database="d", origin="t").statement_timeout_s == 30
    assert uri.with_timeouts(statement_s=9).statement_timeout_s == 9
    assert uri.with_timeouts(statement_s=9).connect_timeout_s == 3


def test_resolution_order_uri_then_environment_then_local_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec("postgres")
    env = {
        "AIRFLOW_CONN_CDC_POSTGRES_READER": "postgres://envuser:x@envhost:1/demo",
        "AIRFLOW_CONN_CDC_POSTGRES": "postgres://writer:x@envhost:1/demo",
    }
    assert resolve_connection(spec, environ=env).user == "envuser"
    assert resolve_connection(spec, role="writer", environ=env).user == "writer"
    explicit = resolve_connection(spec, uri="postgres://dsnuser:y@h:2/demo", origin="--dsn", environ=env)
    assert (explicit.user, explicit.origin) == ("dsnuser", "--dsn")
    assert resolve_connection(spec, uri="postgres://u:y@h:2/demo", environ=env).origin == "explicit connection"

    calls: list[tuple[Any, ...]] = []

    def fake_stack(dialect: str, user: str, database: str, *, origin: str) -> SourceConnection:
        calls.append((dialect, user, database, origin))
        return SourceConnection(dialect, "127.0.0.1", 5433, user, "pw", database, origin)

    monkeypatch.setattr(connection_module, "stack_connection", fake_stack)
    resolve_connection(spec, environ={})
    resolve_connection(spec, role="writer", environ={})
    assert calls == [
        ("postgresql", "reader", "demo", "local stack (set AIRFLOW_CONN_CDC_POSTGRES_READER to override)"),
        ("postgresql", "signal", "demo", "local stack (set AIRFLOW_CONN_CDC_POSTGRES to override)"),
    ]


def _stack() -> Any:
    secrets = {
        f"CDC_{db}_{user}_PASSWORD": f"{db}-{user}" for db in ("POSTGRES", "MARIADB") for user in ("READER", "APP")
    }
    return SimpleNamespace(config=StackConfig(state_dir=None, jvm_dir=None), secrets=secrets)  # type: ignore[arg-type]


def test_stack_connection_uses_the_stacks_users_ports_and_passwords() -> None:
    pg = stack_connection("postgresql", "reader", "demo", stack=_stack())
    assert (pg.dialect, pg.host, pg.port, pg.user, pg.password, pg.database) == (
        "postgresql",
        "127.0.0.1",
        5433,
        "cdc_reader",
        "POSTGRES-READER",
        "demo",
    )
    maria = stack_connection("mysql", "app", "demo", stack=_stack(), origin="local stack mariadb")
    assert (maria.dialect, maria.port, maria.user, maria.password) == ("mariadb", 3307, "cdclake_app", "MARIADB-APP")
    assert maria.origin == "local stack mariadb"


def test_the_local_stack_has_no_informix_or_mongodb() -> None:
    for dialect in ("informix", "mongodb"):
        with pytest.raises(ConfigError, match=f"runs PostgreSQL and MariaDB, not {dialect}"):
            stack_connection(dialect, "reader", "demo", stack=_stack())
        with pytest.raises(ConfigError, match=f"spec {dialect}: set AIRFLOW_CONN_CDC_{dialect.upper()}_READER"):
            resolve_connection(load_spec(dialect), environ={})
