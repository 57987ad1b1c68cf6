"""The registry of source databases by dialect, and what opening one does with the driver (drivers mocked)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

import cdclake.databases as databases
from cdclake.databases import (
    SourceConnection,
    SourceDatabase,
    SourceDatabaseError,
    load_database,
    open_database,
    parse_connection,
    register_database,
    registered_dialects,
)
from cdclake.databases.connection import DEFAULT_PORTS, DIALECT_NAMES
from cdclake.exceptions import ConfigError, NotInstalledError

PG = SourceConnection("postgresql", "db", 5433, "cdc_reader", "s3cret-pw", "demo", "AIRFLOW_CONN_CDC_POSTGRES_READER")
MARIA = SourceConnection("mariadb", "maria", 3307, "cdc_reader", "s3cret-pw", "demo", "local stack")


@pytest.fixture
def registry() -> Iterator[None]:
    """Undo what a test registers."""
    saved = (dict(databases._DATABASES), dict(DIALECT_NAMES), dict(DEFAULT_PORTS))
    yield
    for current, before in zip((databases._DATABASES, DIALECT_NAMES, DEFAULT_PORTS), saved, strict=True):
        current.clear()
        current.update(before)  # type: ignore[attr-defined]


def test_every_source_connector_has_a_registered_dialect() -> None:
    assert registered_dialects() == ("informix", "mariadb", "mongodb", "mysql", "postgresql")
    assert load_database("postgres") is load_database("postgresql")
    assert issubclass(load_database("mariadb"), SourceDatabase)


def test_informix_and_mongodb_say_what_they_need() -> None:
    with pytest.raises(NotInstalledError, match="IfxPy"):
        load_database("informix")
    with pytest.raises(ConfigError, match="pymongo"):
        load_database("mongodb")
    with pytest.raises(ConfigError, match="no source database is registered for 'oracle'; registered: informix"):
        load_database("oracle")


def test_a_registered_dialect_is_parsed_and_opened(registry: None) -> None:
    class Fake(SourceDatabase):
        @classmethod
        def _connect(cls, source: SourceConnection, *, utc: bool) -> Any:
            return mock.Mock(name=f"{source.dialect}:{utc}")

        table = primary_key = rows = row_count = mock.Mock()  # type: ignore[assignment]

    register_database("oracle", lambda: Fake, aliases=("oracle-thin",), default_port=1521)
    source = parse_connection("oracle-thin://scott:tiger@ora/xe", default_database="d", origin="t")
    assert (source.dialect, source.port) == ("oracle", 1521)
    with open_database(source, utc=False) as db:
        assert isinstance(db, Fake) and db.source is source
    db.dbapi.close.assert_called_once_with()


def test_postgres_connects_with_timeouts_and_utc() -> None:
    with mock.patch("psycopg.connect") as connect:
        db = open_database(PG.with_timeouts(connect_s=3, statement_s=1.5))
    connect.assert_called_once_with(
        host="db",
        port=5433,
        user="cdc_reader",
        password="s3cret-pw",
        dbname="demo",
        connect_timeout=3,
        autocommit=True,
        options="-c statement_timeout=1500 -c TimeZone=UTC",
    )
    assert db.dbapi is connect.return_value
    with mock.patch("psycopg.connect") as connect:
        open_database(PG, utc=False)
    assert connect.call_args.kwargs["options"] == "-c statement_timeout=600000"


@pytest.mark.parametrize(
    ("server", "statement"),
    [
        ("11.4.2-MariaDB-deb12", "SET SESSION max_statement_time = 2.5"),
        ("8.0.36", "SET SESSION max_execution_time = 2500"),
    ],
)
def test_mysql_connects_with_timeouts_and_utc(server: str, statement: str) -> None:
    with mock.patch("pymysql.connect") as connect:
        conn = connect.return_value
        conn.get_server_info.return_value = server
        open_database(MARIA.with_timeouts(statement_s=2.5))
    assert connect.call_args.kwargs == {
        "host": "maria",
        "port": 3307,
        "user": "cdc_reader",
        "password": "s3cret-pw",
        "database": "demo",
        "connect_timeout": 10,
        "read_timeout": 12.5,  # the server cancels first
        "autocommit": True,
        "charset": "utf8mb4",
    }
    executed = [c.args[0] for c in conn.cursor.return_value.__enter__.return_value.execute.call_args_list]
    assert executed == [statement, "SET time_zone = '+00:00'"]


def test_no_statement_timeout_and_server_zone() -> None:
    with mock.patch("pymysql.connect") as connect:
        open_database(MARIA.with_timeouts(statement_s=0), utc=False)
    assert connect.call_args.kwargs["read_timeout"] is None
    connect.return_value.cursor.return_value.__enter__.return_value.execute.assert_not_called()


def test_connect_errors_name_the_connection_not_the_password() -> None:
    error = RuntimeError('password authentication failed for user "cdc_reader" (password s3cret-pw)')
    with mock.patch("psycopg.connect", side_effect=error), pytest.raises(SourceDatabaseError) as info:
        open_database(PG)
    message = str(info.value)
    assert "s3cret-pw" not in message
    assert message.startswith(
        "cannot connect to the source database cdc_reader@db:5433/demo (AIRFLOW_CONN_CDC_POSTGRES_READER): "
    )
    assert "check that the database is up and that AIRFLOW_CONN_CDC_POSTGRES_READER has the right host" in message
    with mock.patch("pymysql.connect", side_effect=OSError("refused")), pytest.raises(SourceDatabaseError) as info:
        open_database(MARIA)
    assert "is the local stack up?" in str(info.value)


def test_a_missing_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(NotInstalledError, match="pip install psycopg"):
        open_database(PG)
