"""Where reconcile reads the source, and which tables it compares (no database needed).

Parsing and resolving connections in general: tests/unit/databases/test_source_connection.py.
"""

from __future__ import annotations

import pytest

from cdclake.connectors import load_spec
from cdclake.exceptions import ConfigError
from cdclake.reconcile import lake_identifier, resolve_source_connection, select_tables


def test_explicit_dsn_wins_over_the_environment() -> None:
    spec = load_spec("postgres")
    env = {"AIRFLOW_CONN_CDC_POSTGRES_READER": "postgres://envuser:x@envhost:1/demo"}
    assert resolve_source_connection(spec, environ=env).user == "envuser"
    assert resolve_source_connection(spec, dsn="postgres://dsnuser:y@h:2/demo", environ=env).origin == "--dsn"


@pytest.mark.parametrize("name", ["mongodb", "informix"])
def test_reconcile_reads_sql_databases_only(name: str) -> None:
    with pytest.raises(ConfigError, match=f"spec {name}: reconcile reads PostgreSQL, MySQL and MariaDB, not {name}"):
        resolve_source_connection(load_spec(name), dsn="postgres://u:p@h/db")


def test_select_tables_by_short_qualified_or_lake_name() -> None:
    spec = load_spec("postgres")
    assert [t.name for t in select_tables(spec, None)] == [t.name for t in spec.tables]
    chosen = select_tables(spec, ["customers", "inventory.orders", "lake.pg.inventory.customers"])
    assert [t.name for t in chosen] == ["inventory.customers", "inventory.orders"]
    assert lake_identifier(spec, chosen[0]) == ("pg", "inventory", "customers")
    with pytest.raises(ConfigError, match="not captured by spec postgres"):
        select_tables(spec, ["nope"])
