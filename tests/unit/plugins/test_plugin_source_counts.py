"""The cdc_snapshot task's source row counts: through the spec's reader connection and cdclake.databases."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from cdclake.connectors import load_spec
from cdclake_airflow.callables import source_row_counts

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
OPEN_DATABASE = "cdclake_airflow.callables.open_database"


def test_counts_are_read_through_the_reader_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = {"conn_type": "postgres", "host": "db", "port": 5433, "schema": "demo", "login": "cdc_reader"}
    monkeypatch.setenv("AIRFLOW_CONN_CDC_POSTGRES_READER", json.dumps({**reader, "password": "pw"}))
    with mock.patch(OPEN_DATABASE) as open_database:
        db = open_database.return_value.__enter__.return_value
        db.row_counts.return_value = {"inventory.customers": 5}
        assert source_row_counts(load_spec("postgres", SPEC_DIR), ["inventory.customers"]) == {"inventory.customers": 5}
    source = open_database.call_args.args[0]
    assert (source.dialect, source.host, source.user, source.origin) == (
        "postgresql",
        "db",
        "cdc_reader",
        "connection cdc_postgres_reader",
    )
    db.row_counts.assert_called_once_with(["inventory.customers"])


def test_no_counts_without_the_reader_connection_or_for_mongodb(caplog: pytest.LogCaptureFixture) -> None:
    with mock.patch(OPEN_DATABASE) as open_database:
        assert source_row_counts(load_spec("postgres", SPEC_DIR), ["inventory.customers"]) is None
        assert source_row_counts(load_spec("mongodb", SPEC_DIR), ["demo.orders"]) is None
    open_database.assert_not_called()
    assert "Connection cdc_postgres_reader is not defined" in caplog.text
