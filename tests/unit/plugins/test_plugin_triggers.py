"""Triggers: serialization round-trips and run() against patched hooks (no sleeping)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from unittest import mock

import pytest
from airflow.providers.common.compat.module_loading import import_string
from airflow.triggers.base import BaseTrigger, TriggerEvent

from cdclake.connect import ConnectorStatus
from cdclake.exceptions import ConnectorNotFoundError, ConnectServerError
from cdclake_airflow.triggers.debezium import SnapshotNotificationTrigger
from cdclake_airflow.triggers.kafka_connect import ConnectorRunningTrigger

STATUS_PATH = "cdclake_airflow.hooks.kafka_connect.KafkaConnectHook.status"
GET_CONSUMER_PATH = "cdclake_airflow.hooks.debezium_notification.DebeziumNotificationHook.get_consumer"


def _status(connector: str, *tasks: str, trace: str | None = None) -> ConnectorStatus:
    return ConnectorStatus.model_validate(
        {
            "name": "postgres",
            "connector": {"state": connector},
            "tasks": [{"id": i, "state": s, "trace": trace} for i, s in enumerate(tasks)],
        }
    )


def _first_event(trigger: BaseTrigger) -> TriggerEvent:
    async def _run() -> TriggerEvent:
        gen: AsyncIterator[TriggerEvent] = trigger.run()
        return await gen.__anext__()

    return asyncio.run(asyncio.wait_for(_run(), timeout=10))


@pytest.mark.parametrize(
    ("trigger", "classpath", "kwargs"),
    [
        (
            ConnectorRunningTrigger("postgres", "kafka_connect_default", poll_interval=2.0),
            "cdclake_airflow.triggers.kafka_connect.ConnectorRunningTrigger",
            {"connector_name": "postgres", "kafka_connect_conn_id": "kafka_connect_default", "poll_interval": 2.0},
        ),
        (
            SnapshotNotificationTrigger("pg.notifications", "sig-1", "kafka_default", 1234, 0.5, 3.0),
            "cdclake_airflow.triggers.debezium.SnapshotNotificationTrigger",
            {
                "topic": "pg.notifications",
                "signal_id": "sig-1",
                "kafka_config_id": "kafka_default",
                "blocking_since_ms": 1234,
                "poll_timeout": 0.5,
                "poll_interval": 3.0,
            },
        ),
    ],
    ids=["connector_running", "snapshot_notification"],
)
def test_trigger_serialization(trigger: BaseTrigger, classpath: str, kwargs: dict[str, Any]) -> None:
    assert trigger.serialize() == (classpath, kwargs)
    json.dumps(kwargs)  # only JSON-able values
    rebuilt = import_string(classpath)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)


def test_connector_running_trigger_waits_then_fires() -> None:
    statuses = [
        ConnectorNotFoundError("Connector postgres not found"),
        _status("RUNNING", "UNASSIGNED"),
        _status("RUNNING", "RUNNING"),
    ]
    with mock.patch(STATUS_PATH, side_effect=statuses) as status:
        event = _first_event(ConnectorRunningTrigger("postgres", "kafka_connect_default", poll_interval=0))
    assert event.payload == {
        "status": "running",
        "connector": "postgres",
        "state": "postgres connector=RUNNING tasks=[0:RUNNING]",
    }
    assert status.call_count == 3


def test_connector_running_trigger_fails_fast_with_trace() -> None:
    with mock.patch(STATUS_PATH, return_value=_status("RUNNING", "FAILED", trace="ConnectException: slot busy")):
        event = _first_event(ConnectorRunningTrigger("postgres", "kafka_connect_default", poll_interval=0))
    assert event.payload["status"] == "failed"
    assert "ConnectException: slot busy" in event.payload["message"]


def test_connector_running_trigger_reports_errors() -> None:
    with mock.patch(STATUS_PATH, side_effect=ConnectServerError("HTTP 500: boom")):
        event = _first_event(ConnectorRunningTrigger("postgres", "kafka_connect_default", poll_interval=0))
    assert event.payload == {"status": "error", "connector": "postgres", "message": "HTTP 500: boom"}


class _Msg:
    def __init__(self, value: dict[str, Any] | None, offset: int) -> None:
        self._value = None if value is None else json.dumps(value).encode()
        self._offset = offset

    def error(self) -> None:
        return None

    def value(self) -> bytes | None:
        return self._value

    def topic(self) -> str:
        return "pg.notifications"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset


class _Consumer:
    def __init__(self, batches: list[list[_Msg]]) -> None:
        self.batches = batches
        self.closed = False

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[_Msg]:
        return self.batches.pop(0) if self.batches else []

    def close(self) -> None:
        self.closed = True


def _notification(kind: str, nid: str = "sig-1") -> dict[str, Any]:
    return {
        "id": nid,
        "aggregate_type": "Incremental Snapshot",
        "type": kind,
        "additional_data": {"connector_name": "pg"},
        "timestamp": 1,
    }


@pytest.mark.parametrize(("final", "status"), [("COMPLETED", "completed"), ("ABORTED", "aborted")])
def test_snapshot_trigger_reads_until_terminal(final: str, status: str) -> None:
    consumer = _Consumer(
        [
            [_Msg(_notification("STARTED"), 0), _Msg(_notification("COMPLETED", nid="other"), 1), _Msg(None, 2)],
            [],
            [_Msg({"not": "a notification"}, 3), _Msg(_notification(final), 4)],
        ]
    )
    trigger = SnapshotNotificationTrigger("pg.notifications", "sig-1", poll_interval=0)
    with mock.patch(GET_CONSUMER_PATH, return_value=consumer):
        event = _first_event(trigger)
    assert event.payload == {"status": status, "signal_id": "sig-1", "topic": "pg.notifications"}
    assert consumer.closed
