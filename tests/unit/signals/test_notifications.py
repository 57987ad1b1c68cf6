"""Parsing Debezium notification records and deciding whether a snapshot finished."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdclake.exceptions import NotificationDecodeError
from cdclake.signals import Notification, parse_notification, snapshot_finished

SIGNAL_ID = "d139b9b7-7777-4547-917d-e1775ea61d41"

# The sink channel's value schema (SchemaFactory.notificationValueSchema) as JsonConverter writes it.
NOTIFICATION_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "aggregate_type"},
        {"type": "string", "optional": False, "field": "type"},
        {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": {"type": "string", "optional": False},
            "optional": True,
            "field": "additional_data",
        },
        {"type": "int64", "optional": False, "field": "timestamp"},
    ],
    "optional": False,
    "name": "io.debezium.connector.common.Notification",
    "version": 1,
}


def _payload(
    kind: str, aggregate: str = "Incremental Snapshot", nid: str = SIGNAL_ID, ts: int = 1_700_000_000_000, **extra: str
) -> dict[str, Any]:
    return {
        "id": nid,
        "aggregate_type": aggregate,
        "type": kind,
        "additional_data": {"connector_name": "pg", **extra},
        "timestamp": ts,
    }


def _with_schema(payload: dict[str, Any]) -> bytes:
    return json.dumps({"schema": NOTIFICATION_SCHEMA, "payload": payload}).encode()


INCREMENTAL_RUN = [
    _payload("STARTED", data_collections="inventory.customers,inventory.orders"),
    _payload(
        "IN_PROGRESS",
        data_collections="inventory.customers,inventory.orders",
        current_collection_in_progress="inventory.customers",
        maximum_key="1004",
        last_processed_key="1004",
    ),
    _payload(
        "TABLE_SCAN_COMPLETED",
        data_collections="inventory.customers,inventory.orders",
        scanned_collection="inventory.customers",
        total_rows_scanned="4",
        status="SUCCEEDED",
    ),
    _payload("COMPLETED"),
]


def test_parse_with_schema_envelope() -> None:
    n = parse_notification(_with_schema(INCREMENTAL_RUN[0]), topic="pg.notifications", partition=0, offset=3)
    assert n == Notification(
        id=SIGNAL_ID,
        aggregate_type="Incremental Snapshot",
        type="STARTED",
        additional_data={"connector_name": "pg", "data_collections": "inventory.customers,inventory.orders"},
        timestamp=1_700_000_000_000,
    )
    assert n.connector_name == "pg"
    assert n.data_collections == ("inventory.customers", "inventory.orders")
    assert not n.is_terminal


def test_parse_schemaless_str_and_mapping() -> None:
    assert parse_notification(json.dumps(INCREMENTAL_RUN[3])).is_terminal
    initial = parse_notification(
        {"id": "x", "aggregate_type": "Initial Snapshot", "type": "SKIPPED", "additional_data": None, "timestamp": 1}
    )
    assert initial.additional_data == {}


@pytest.mark.parametrize(
    ("value", "match"),
    [(b"not json", "not JSON"), (b"[1, 2]", "must be a JSON object"), (b'{"id": "x"}', "not a Debezium notification")],
)
def test_parse_errors_carry_coordinates(value: bytes, match: str) -> None:
    with pytest.raises(NotificationDecodeError, match=match) as info:
        parse_notification(value, topic="pg.notifications", partition=0, offset=17)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("pg.notifications", 0, 17)
    assert "offset=17" in str(info.value)


def _parsed(payloads: list[dict[str, Any]]) -> list[Notification]:
    return [parse_notification(_with_schema(p)) for p in payloads]


def test_incremental_completed() -> None:
    assert snapshot_finished(_parsed(INCREMENTAL_RUN), SIGNAL_ID) is True


def test_incremental_in_progress_is_none() -> None:
    assert snapshot_finished(_parsed(INCREMENTAL_RUN[:3]), SIGNAL_ID) is None


def test_incremental_aborted_is_false() -> None:
    assert snapshot_finished(_parsed([INCREMENTAL_RUN[0], _payload("ABORTED")]), SIGNAL_ID) is False


def test_other_signal_ids_are_ignored() -> None:
    assert snapshot_finished(_parsed([_payload("COMPLETED", nid="other")]), SIGNAL_ID) is None


def test_blocking_matched_by_time() -> None:
    # Blocking snapshots are reported as "Initial Snapshot" with random ids.
    old = _payload("COMPLETED", aggregate="Initial Snapshot", nid="random-1", ts=1_000)
    new_started = _payload("STARTED", aggregate="Initial Snapshot", nid="random-2", ts=5_000)
    new_done = _payload("COMPLETED", aggregate="Initial Snapshot", nid="random-3", ts=6_000)
    notifications = _parsed([old, new_started, new_done])
    assert snapshot_finished(notifications, SIGNAL_ID) is None  # no time given: not correlated
    assert snapshot_finished(notifications, SIGNAL_ID, blocking_since_ms=4_000) is True
    assert snapshot_finished(notifications[:2], SIGNAL_ID, blocking_since_ms=4_000) is None
    aborted = _parsed([_payload("ABORTED", aggregate="Initial Snapshot", nid="r", ts=7_000)])
    assert snapshot_finished(aborted, SIGNAL_ID, blocking_since_ms=4_000) is False


def test_blocking_snapshot_aggregate_with_signal_id() -> None:
    assert snapshot_finished(_parsed([_payload("COMPLETED", aggregate="Blocking Snapshot")]), SIGNAL_ID) is True
