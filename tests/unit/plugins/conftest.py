"""Make ``plugins/`` importable the way Airflow does (``import cdclake_airflow...``) and provide connections."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

PLUGINS_DIR = Path(__file__).resolve().parents[3] / "plugins"
if str(PLUGINS_DIR) not in sys.path:
    sys.path.insert(0, str(PLUGINS_DIR))

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"


def _conn(**fields: object) -> str:
    return json.dumps(fields)


@pytest.fixture(autouse=True)
def setup_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections as AIRFLOW_CONN_* env vars (JSON form), so no metadata DB is needed."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_CONNECT_DEFAULT",
        _conn(
            conn_type="kafka_connect",
            host="connect.test",
            port=8083,
            schema="http",
            extra={"timeout": [2, 10], "retries": 1},
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_POSTGRES",
        _conn(conn_type="postgres", host="127.0.0.1", port=5433, schema="demo", login="cdc_signal", password="pw"),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_CDC_MARIADB",
        _conn(conn_type="mysql", host="127.0.0.1", port=3307, schema="demo", login="cdc_signal", password="pw"),
    )
    monkeypatch.setenv("AIRFLOW_CONN_CDC_INFORMIX", _conn(conn_type="informix", host="ifx", port=9088, schema="demo"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        _conn(conn_type="kafka", extra={"bootstrap.servers": "127.0.0.1:9092", "group.id": "airflow"}),
    )
