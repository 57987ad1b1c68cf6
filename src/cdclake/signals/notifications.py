"""Debezium notifications from the ``sink`` channel topic (``<prefix>.notifications``).

Value: ``{id, aggregate_type, type, additional_data, timestamp}``, with or without the JsonConverter
``{"schema", "payload"}`` envelope.

Correlation with signals:

* ``Incremental Snapshot`` notifications carry the signal's ``id`` (when several incremental
  snapshots run at once, the id of the last signal). COMPLETED means done, ABORTED means stopped.
* Blocking snapshots are reported like the initial snapshot (``Initial Snapshot``) with **random**
  ids, so they are matched by time instead: the first COMPLETED/ABORTED at or after the moment the
  signal was sent. ``Blocking Snapshot`` is accepted too, should a later Debezium use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cdclake.exceptions import NotificationDecodeError

INCREMENTAL_SNAPSHOT = "Incremental Snapshot"
INITIAL_SNAPSHOT = "Initial Snapshot"
BLOCKING_SNAPSHOT = "Blocking Snapshot"

STARTED = "STARTED"
IN_PROGRESS = "IN_PROGRESS"
TABLE_SCAN_COMPLETED = "TABLE_SCAN_COMPLETED"
PAUSED = "PAUSED"
RESUMED = "RESUMED"
SKIPPED = "SKIPPED"
COMPLETED = "COMPLETED"
ABORTED = "ABORTED"

CONNECTOR_NAME = "connector_name"
DATA_COLLECTIONS = "data_collections"
LIST_DELIMITER = ","


class Notification(BaseModel):
    """One Debezium notification."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    id: str
    aggregate_type: str
    type: str
    additional_data: dict[str, str] = Field(default_factory=dict)
    timestamp: int | None = None

    @property
    def connector_name(self) -> str | None:
        """``additional_data.connector_name`` (the connector's topic prefix)."""
        return self.additional_data.get(CONNECTOR_NAME)

    @property
    def data_collections(self) -> tuple[str, ...]:
        """``additional_data.data_collections`` split on commas."""
        raw = self.additional_data.get(DATA_COLLECTIONS) or ""
        return tuple(part.strip() for part in raw.split(LIST_DELIMITER) if part.strip())

    @property
    def is_terminal(self) -> bool:
        """COMPLETED or ABORTED."""
        return self.type in (COMPLETED, ABORTED)


def parse_notification(
    value: bytes | str | Mapping[str, Any],
    *,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> Notification:
    """Parse one notification record value (JSON bytes/str or an already-decoded mapping).

    Args:
        value: the record value.
        topic: Kafka coordinates, only used in error messages.
        partition: see ``topic``.
        offset: see ``topic``.

    Raises:
        NotificationDecodeError: when the value is not a notification; carries the coordinates.
    """
    coords = {"topic": topic, "partition": partition, "offset": offset}
    if isinstance(value, bytes | str):
        try:
            body: Any = json.loads(value)
        except ValueError as exc:
            raise NotificationDecodeError(f"notification is not JSON: {exc}", **coords) from exc
    else:
        body = dict(value)
    if isinstance(body, dict) and "payload" in body and "schema" in body:
        body = body["payload"]
    if not isinstance(body, dict):
        raise NotificationDecodeError(f"notification must be a JSON object, got {type(body).__name__}", **coords)
    if isinstance(body.get("additional_data"), Mapping):
        body = {**body, "additional_data": {str(k): str(v) for k, v in body["additional_data"].items()}}
    elif body.get("additional_data") is None:
        body = {**body, "additional_data": {}}
    try:
        return Notification.model_validate(body)
    except ValidationError as exc:
        raise NotificationDecodeError(f"not a Debezium notification: {exc}", **coords) from exc


def snapshot_finished(
    notifications: Iterable[Notification],
    signal_id: str,
    *,
    blocking_since_ms: int | None = None,
) -> bool | None:
    """Whether the snapshot started by a signal has finished.

    Args:
        notifications: notifications in topic order.
        signal_id: the ``execute-snapshot`` signal's id.
        blocking_since_ms: for blocking snapshots, the epoch-ms time the signal was sent; enables
            time-based matching of ``Initial Snapshot``/``Blocking Snapshot`` notifications.

    Returns:
        True on COMPLETED, False on ABORTED, None while no terminal notification was seen.
    """
    for n in notifications:
        if not n.is_terminal:
            continue
        if n.aggregate_type in (INCREMENTAL_SNAPSHOT, BLOCKING_SNAPSHOT) and n.id == signal_id:
            return n.type == COMPLETED
        if (
            blocking_since_ms is not None
            and n.aggregate_type in (INITIAL_SNAPSHOT, BLOCKING_SNAPSHOT)
            and n.timestamp is not None
            and n.timestamp >= blocking_since_ms
        ):
            return n.type == COMPLETED
    return None
