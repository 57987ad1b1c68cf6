"""Where reconcile reads the source, and which tables it compares (no database needed)."""

from __future__ import annotations

import json

import pytest

from cdclake.connectors import load_spec
from cdclake.exceptions import ConfigError
from cdclake.reconcile import (
    lake_identifier,
    parse_connection,
    reader_connection_env,
    resolve_source_connection,
    select_tables,
)


def test_reader_connection_env_follows_the_specs_connection_id() -> None:
    assert reader_connection_env(load_spec("postgres")) == "AIRFLOW_CONN_CDC_POSTGRES_READER"
    assert reader_connection_env(load_spec("mariadb")) == "AIRFLOW_CONN_CDC_MARIADB_READER"


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
            ("postgres", "db", 5433, "app", "s3", "shop"),
        ),
        ("postgresql://app:p%40ss@db:6543/shop", ("postgres", "db", 6543, "app", "p@ss", "shop")),
        ("mysql://app:pw@maria/", ("mysql", "maria", 3306, "app", "pw", "demo")),  # database from the spec
        ("mariadb://app@maria:3307", ("mysql", "maria", 3307, "app", "", "demo")),
    ],
)
def test_parse_connection(value: str, expected: tuple[object, ...]) -> None:
    conn = parse_connection(value, default_database="demo", origin="test")
    assert (conn.kind, conn.host, conn.port, conn.user, conn.password, conn.database) == expected
    assert conn.password not in repr(conn) or not conn.password
    assert "(test)" in conn.describe()


@pytest.mark.parametrize(
    ("value", "message"),
    [("oracle://u:p@h/db", "connection type 'oracle'"), ("{not json", "not valid JSON"), ("postgres:///db", "host")],
)
def test_parse_connection_errors_name_the_origin(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_connection(value, default_database="demo", origin="AIRFLOW_CONN_X_READER")
    assert "AIRFLOW_CONN_X_READER" in str(info.value)


def test_explicit_dsn_wins_over_the_environment() -> None:
    spec = load_spec("postgres")
    env = {"AIRFLOW_CONN_CDC_POSTGRES_READER": "postgres://envuser:x@envhost:1/demo"}
    assert resolve_source_connection(spec, environ=env).user == "envuser"
    assert resolve_source_connection(spec, dsn="postgres://dsnuser:y@h:2/demo", environ=env).origin == "--dsn"


def test_select_tables_by_short_qualified_or_lake_name() -> None:
    spec = load_spec("postgres")
    assert [t.name for t in select_tables(spec, None)] == [t.name for t in spec.tables]
    chosen = select_tables(spec, ["customers", "inventory.orders", "lake.pg.inventory.customers"])
    assert [t.name for t in chosen] == ["inventory.customers", "inventory.orders"]
    assert lake_identifier(spec, chosen[0]) == ("pg", "inventory", "customers")
    with pytest.raises(ConfigError, match="not captured by spec postgres"):
        select_tables(spec, ["nope"])
