"""Signal channels: SQL text has placeholders and values are bound; Mongo document; Kafka message."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cdclake.connectors import load_spec
from cdclake.exceptions import NotInstalledError, SignalDeliveryError, SignalValidationError
from cdclake.signals import (
    ExecuteSnapshot,
    PauseSnapshot,
    SqlDialect,
    build_signal_insert,
    checked_for_spec,
    kafka_signal_message,
    mongo_client,
    mongo_signal_document,
    send_kafka_signal,
    send_mongo_signal,
    send_sql_signal,
    signal_insert,
)

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"
# a valid filter whose string literal holds SQL: it stays a literal, in the bound parameter only
HOSTILE = "status = 'x''); DROP TABLE inventory.orders; --'"


def _snapshot(collection: str) -> ExecuteSnapshot:
    return ExecuteSnapshot.model_validate(
        {
            "id": "sig-1",
            "data-collections": [collection],
            "additional-conditions": [{"data-collection": collection, "filter": HOSTILE}],
        }
    )


@pytest.mark.parametrize(
    ("spec_name", "collection", "expected_sql", "quote"),
    [
        (
            "postgres",
            "inventory.orders",
            'INSERT INTO "inventory"."debezium_signal" (id, type, data) VALUES (%s, %s, %s)',
            '"',
        ),
        ("mariadb", "demo.orders", "INSERT INTO `demo`.`debezium_signal` (id, type, data) VALUES (%s, %s, %s)", "`"),
        ("mysql", "demo.orders", "INSERT INTO `demo`.`debezium_signal` (id, type, data) VALUES (%s, %s, %s)", "`"),
        (
            "informix",
            "demo.informix.orders",
            "INSERT INTO informix.debezium_signal (id, type, data) VALUES (?, ?, ?)",
            "",
        ),
    ],
)
def test_sql_insert_binds_values(spec_name: str, collection: str, expected_sql: str, quote: str) -> None:
    spec = load_spec(spec_name, SPEC_DIR)
    signal = _snapshot(collection)

    statement = signal_insert(spec, signal)

    assert statement.sql == expected_sql
    assert "sig-1" not in statement.sql
    assert "DROP" not in statement.sql
    assert statement.params[0:2] == ("sig-1", "execute-snapshot")
    # the filter is sent as regenerated in the source's dialect (identifiers quoted, except for Informix)
    sent = json.loads(statement.params[2])["additional-conditions"][0]["filter"]
    assert sent == f"{quote}status{quote} = 'x''); DROP TABLE inventory.orders; --'"


def test_sql_insert_without_data_binds_null() -> None:
    statement = signal_insert(load_spec("postgres", SPEC_DIR), PauseSnapshot(id="p1"))
    assert statement.params == ("p1", "pause-snapshot", None)


def test_table_name_must_be_identifiers() -> None:
    with pytest.raises(SignalValidationError, match="not a plain SQL identifier"):
        build_signal_insert(SqlDialect.POSTGRESQL, 'inventory."x";--', PauseSnapshot(id="p").to_record())


def test_mongodb_has_no_sql_channel() -> None:
    with pytest.raises(SignalValidationError, match="mongo_signal_document"):
        signal_insert(load_spec("mongodb", SPEC_DIR), PauseSnapshot())


class _Cursor:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.closed = False
        self.fail = fail

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        if self.fail:
            raise RuntimeError("permission denied for table debezium_signal")
        self.calls.append((sql, params))

    def close(self) -> None:
        self.closed = True


class _Connection:
    def __init__(self, fail: bool = False) -> None:
        self.cur = _Cursor(fail)
        self.commits = 0

    def cursor(self) -> _Cursor:
        return self.cur

    def commit(self) -> None:
        self.commits += 1


def test_send_sql_signal_executes_with_params_and_commits() -> None:
    conn = _Connection()
    statement = signal_insert(load_spec("postgres", SPEC_DIR), _snapshot("inventory.orders"))
    send_sql_signal(conn, statement)
    assert conn.cur.calls == [(statement.sql, statement.params)]
    assert conn.commits == 1
    assert conn.cur.closed


def test_send_sql_signal_wraps_errors() -> None:
    conn = _Connection(fail=True)
    statement = signal_insert(load_spec("postgres", SPEC_DIR), PauseSnapshot(id="p"))
    with pytest.raises(SignalDeliveryError, match="permission denied") as info:
        send_sql_signal(conn, statement)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert conn.cur.closed


def test_mongo_document_and_sender() -> None:
    signal = _snapshot("demo.orders")
    assert mongo_signal_document(signal) == {"_id": "sig-1", "type": "execute-snapshot", "data": signal.data()}
    assert mongo_signal_document(PauseSnapshot(id="p")) == {"_id": "p", "type": "pause-snapshot"}

    inserted: list[dict[str, Any]] = []

    class _Coll:
        def insert_one(self, doc: dict[str, Any]) -> None:
            inserted.append(doc)

    client = {"demo": {"debezium_signal": _Coll()}}
    send_mongo_signal(client, "demo.debezium_signal", signal)
    assert inserted == [mongo_signal_document(signal)]


def test_mongo_client_without_pymongo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymongo", None)
    with pytest.raises(NotInstalledError, match="pip install 'pymongo"):
        mongo_client("mongodb://h/")


def test_kafka_message_key_is_prefix_and_value_json() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    signal = _snapshot("inventory.orders")
    message = kafka_signal_message(spec, signal)
    assert message.topic == "pg-signal"
    assert message.key == "pg" == spec.topic_prefix
    value = message.value_json()
    assert value == {"id": "sig-1", "type": "execute-snapshot", "data": checked_for_spec(signal, spec).data()}
    assert value["data"]["additional-conditions"][0]["filter"] == "\"status\" = 'x''); DROP TABLE inventory.orders; --'"
    assert kafka_signal_message(spec, PauseSnapshot(id="p"), topic="t").value_json() == {
        "id": "p",
        "type": "pause-snapshot",
        "data": {},
    }


class _Msg:
    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 42


class _Producer:
    def __init__(self, error: str | None = None, remaining: int = 0) -> None:
        self.produced: list[tuple[str, bytes, bytes]] = []
        self.error = error
        self.remaining = remaining
        self._cb: Any = None

    def produce(self, topic: str, value: Any = None, key: Any = None, on_delivery: Any = None) -> None:
        self.produced.append((topic, key, value))
        self._cb = on_delivery

    def flush(self, timeout: float = 0) -> int:
        if self._cb and not self.remaining:
            self._cb(self.error, _Msg())
        return self.remaining


def test_send_kafka_signal() -> None:
    message = kafka_signal_message(load_spec("postgres", SPEC_DIR), PauseSnapshot(id="p"))
    producer = _Producer()
    send_kafka_signal(producer, message)
    assert producer.produced == [("pg-signal", b"pg", message.value)]


@pytest.mark.parametrize(
    ("producer", "match"),
    [(_Producer(error="UNKNOWN_TOPIC_OR_PART"), "UNKNOWN_TOPIC_OR_PART"), (_Producer(remaining=1), "not delivered")],
)
def test_send_kafka_signal_failures(producer: _Producer, match: str) -> None:
    message = kafka_signal_message(load_spec("postgres", SPEC_DIR), PauseSnapshot(id="p"))
    with pytest.raises(SignalDeliveryError, match=match):
        send_kafka_signal(producer, message, timeout_s=0.1)
