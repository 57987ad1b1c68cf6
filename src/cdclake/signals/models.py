"""Debezium signal models: ``execute-snapshot``, ``stop-snapshot``, ``pause-snapshot``, ``resume-snapshot``, ``log``.

A signal is three values, the columns of the signal table: ``id``, ``type`` and ``data`` (a JSON
string). Attribute names are snake_case with Debezium's wire names as aliases
(``data_collections`` <-> ``data-collections``).

An ``execute-snapshot`` signal's filters are checked by :mod:`cdclake.signals.filters` when it is validated:
in the connector's SQL dialect, and regenerated in it, when the validation context names the connector
(:func:`build_signal` ``connector=``, :func:`checked_for_spec`); as ANSI SQL, kept as written, when it does not.
MongoDB filters are not SQL: an incremental one must not be a SELECT, a blocking one must be.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from cdclake.connectors.spec import ConnectorKind, ConnectorSpec
from cdclake.exceptions import SignalValidationError

SIGNAL_ID_MAX_LENGTH = 42
"""Width of the signal table's ``id`` column (``VARCHAR(42)``); longer ids cannot be processed."""

_SELECT = re.compile(r"^\s*select\b", re.IGNORECASE)


class SignalType(StrEnum):
    """Signal ``type`` values the orchestrator sends."""

    EXECUTE_SNAPSHOT = "execute-snapshot"
    STOP_SNAPSHOT = "stop-snapshot"
    PAUSE_SNAPSHOT = "pause-snapshot"
    RESUME_SNAPSHOT = "resume-snapshot"
    LOG = "log"


class SnapshotType(StrEnum):
    """The ``type`` inside an ``execute-snapshot`` signal's data."""

    INCREMENTAL = "incremental"
    BLOCKING = "blocking"


@dataclass(frozen=True)
class SignalRecord:
    """The three signal-table columns; ``data`` is the JSON text (or None)."""

    id: str
    type: str
    data: str | None


class _SignalModel(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")


def _new_id() -> str:
    return str(uuid.uuid4())


class AdditionalCondition(_SignalModel):
    """Per-collection snapshot filter: a WHERE condition (incremental) or a full SELECT (blocking).

    What a filter may contain: :mod:`cdclake.signals.filters`.
    """

    data_collection: str = Field(alias="data-collection", min_length=1)
    filter: str = Field(min_length=1)


def _checked_filter(
    cond: AdditionalCondition,
    snapshot_type: SnapshotType,
    connector: ConnectorKind | None,
    columns: Collection[str] | None,
) -> str:
    """The filter as it is sent: regenerated in the connector's dialect, as written without a connector (it is
    then checked as ANSI SQL) or for MongoDB (not SQL: only its kind is checked)."""
    if connector is ConnectorKind.MONGODB:
        is_select = bool(_SELECT.match(cond.filter))
        if snapshot_type is SnapshotType.BLOCKING and not is_select:
            raise ValueError(
                f"filter of {cond.data_collection}: a blocking snapshot filter must be a full SELECT statement, "
                f"got {cond.filter!r}"
            )
        if snapshot_type is SnapshotType.INCREMENTAL and is_select:
            raise ValueError(
                f"filter of {cond.data_collection}: an incremental snapshot filter is a condition, not a SELECT"
            )
        return cond.filter
    from cdclake.signals.filters import ANSI, check_filter, filter_dialect

    if connector is None:
        try:
            check_filter(cond.filter, cond.data_collection, snapshot_type.value, ANSI, columns)
        except SignalValidationError as exc:
            if "cannot be" not in str(exc):
                raise
            raise SignalValidationError(
                f"{exc} (no connector given: give it to parse the filter in its dialect)"
            ) from exc
        return cond.filter
    dialect = filter_dialect(connector)
    assert dialect is not None
    return check_filter(cond.filter, cond.data_collection, snapshot_type.value, dialect, columns)


class _Signal(_SignalModel):
    signal_type: ClassVar[SignalType]

    id: Annotated[str, Field(default_factory=_new_id, min_length=1, max_length=SIGNAL_ID_MAX_LENGTH)]

    @property
    def type(self) -> str:
        """The signal ``type`` column value."""
        return self.signal_type.value

    def data(self) -> dict[str, Any] | None:
        """The signal's ``data`` object (None when the signal has none)."""
        return None

    def data_json(self) -> str | None:
        """``data`` as compact JSON text, as written to the signal table's ``data`` column."""
        data = self.data()
        return None if data is None else json.dumps(data, separators=(",", ":"))

    def to_record(self) -> SignalRecord:
        """The signal-table row."""
        return SignalRecord(id=self.id, type=self.type, data=self.data_json())

    def referenced_collections(self) -> tuple[str, ...]:
        """Every data collection the signal names."""
        return ()


class ExecuteSnapshot(_Signal):
    """``execute-snapshot``: an ad hoc incremental or blocking snapshot of some data collections."""

    signal_type: ClassVar[SignalType] = SignalType.EXECUTE_SNAPSHOT

    snapshot_type: SnapshotType = Field(default=SnapshotType.INCREMENTAL, alias="type")
    data_collections: tuple[str, ...] = Field(alias="data-collections", min_length=1)
    additional_conditions: tuple[AdditionalCondition, ...] = Field(default=(), alias="additional-conditions")
    surrogate_key: str | None = Field(default=None, alias="surrogate-key", min_length=1)

    @field_validator("additional_conditions")
    @classmethod
    def _check_conditions(
        cls, conditions: tuple[AdditionalCondition, ...], info: ValidationInfo
    ) -> tuple[AdditionalCondition, ...]:
        snapshot_type = info.data.get("snapshot_type")
        collections = info.data.get("data_collections")
        if snapshot_type is None or collections is None:
            return conditions  # their own errors are reported
        context = info.context or {}
        connector: ConnectorKind | None = context.get("connector")
        columns: Mapping[str, Collection[str]] = context.get("columns") or {}
        checked = []
        for i, cond in enumerate(conditions):
            if cond.data_collection not in collections:
                raise ValueError(
                    f"additional-conditions[{i}]: {cond.data_collection!r} is not one of the data-collections"
                )
            text = _checked_filter(cond, snapshot_type, connector, columns.get(cond.data_collection))
            checked.append(cond if text == cond.filter else cond.model_copy(update={"filter": text}))
        return tuple(checked)

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.snapshot_type.value, "data-collections": list(self.data_collections)}
        if self.additional_conditions:
            data["additional-conditions"] = [c.model_dump(by_alias=True) for c in self.additional_conditions]
        if self.surrogate_key:
            data["surrogate-key"] = self.surrogate_key
        return data

    def referenced_collections(self) -> tuple[str, ...]:
        return self.data_collections


class StopSnapshot(_Signal):
    """``stop-snapshot``: stop the running incremental snapshot, or remove some collections from it."""

    signal_type: ClassVar[SignalType] = SignalType.STOP_SNAPSHOT

    data_collections: tuple[str, ...] = Field(default=(), alias="data-collections")

    def data(self) -> dict[str, Any]:
        # Debezium needs "type": "incremental" here, otherwise the stop is ignored.
        data: dict[str, Any] = {"type": SnapshotType.INCREMENTAL.value}
        if self.data_collections:
            data["data-collections"] = list(self.data_collections)
        return data

    def referenced_collections(self) -> tuple[str, ...]:
        return self.data_collections


class PauseSnapshot(_Signal):
    """``pause-snapshot``: pause the running incremental snapshot (no data)."""

    signal_type: ClassVar[SignalType] = SignalType.PAUSE_SNAPSHOT


class ResumeSnapshot(_Signal):
    """``resume-snapshot``: resume a paused incremental snapshot (no data)."""

    signal_type: ClassVar[SignalType] = SignalType.RESUME_SNAPSHOT


class LogSignal(_Signal):
    """``log``: write a message to the connector log; ``{}`` is replaced with the current offset."""

    signal_type: ClassVar[SignalType] = SignalType.LOG

    message: str = Field(min_length=1)

    def data(self) -> dict[str, Any]:
        return {"message": self.message}


Signal = ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot | LogSignal

SIGNAL_CLASSES: dict[SignalType, type[_Signal]] = {
    SignalType.EXECUTE_SNAPSHOT: ExecuteSnapshot,
    SignalType.STOP_SNAPSHOT: StopSnapshot,
    SignalType.PAUSE_SNAPSHOT: PauseSnapshot,
    SignalType.RESUME_SNAPSHOT: ResumeSnapshot,
    SignalType.LOG: LogSignal,
}


def build_signal(
    signal_type: str | SignalType,
    *,
    connector: ConnectorKind | None = None,
    columns: Mapping[str, Collection[str]] | None = None,
    **fields: Any,
) -> Signal:
    """Build a signal from its type and fields (snake_case or wire names); ``id=None`` means a new uuid4.

    Args:
        signal_type: the signal ``type``.
        connector: the source's connector: an ``execute-snapshot``'s filters are parsed in its SQL dialect and
            regenerated in it (:mod:`cdclake.signals.filters`); without it they are checked as ANSI SQL and kept
            as written.
        columns: data collection -> its column names, for the filters' column checks (optional per table).
        **fields: the signal's fields.

    Raises:
        SignalValidationError: for an unknown type or invalid fields (a refused filter names its data
            collection and why).
    """
    try:
        kind = SignalType(signal_type)
    except ValueError as exc:
        known = ", ".join(t.value for t in SignalType)
        raise SignalValidationError(f"unknown signal type {signal_type!r}; use one of {known}") from exc
    values = {k: v for k, v in fields.items() if v is not None}
    return _validate(kind, values, {"connector": connector, "columns": columns})


def _validate(kind: SignalType, values: Mapping[str, Any], context: Mapping[str, Any]) -> Signal:
    try:
        signal = SIGNAL_CLASSES[kind].model_validate(values, context=dict(context))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'data'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise SignalValidationError(f"invalid {kind.value} signal: {problems}") from exc
    assert isinstance(signal, ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot | LogSignal)
    return signal


def validate_for_spec(signal: Signal, spec: ConnectorSpec) -> None:
    """Check that every collection the signal names is a table of the spec.

    Raises:
        SignalValidationError: naming the unknown collection and the spec file.
    """
    known = set(spec.table_names)
    for name in signal.referenced_collections():
        if name not in known:
            raise SignalValidationError(
                f"{signal.type} signal {signal.id}: {name!r} is not a table of {spec.describe()} "
                f"(known: {', '.join(spec.table_names)})"
            )


def checked_for_spec(
    signal: Signal, spec: ConnectorSpec, columns: Mapping[str, Collection[str]] | None = None
) -> Signal:
    """The signal as it may be sent for a spec: its collections are tables of the spec, and an
    ``execute-snapshot``'s filters are checked in the spec's SQL dialect and regenerated in it.

    Args:
        signal: the signal.
        spec: the connector spec.
        columns: data collection -> its column names (when they could be read): every name a filter uses must
            be one of them.

    Returns:
        The signal, with its filters as :func:`cdclake.signals.filters.check_filter` regenerates them (the same
        object when it has no filter).

    Raises:
        SignalValidationError: naming the unknown collection, or the data collection whose filter is refused
            and why.
    """
    validate_for_spec(signal, spec)
    if not isinstance(signal, ExecuteSnapshot) or not signal.additional_conditions:
        return signal
    values = signal.model_dump()
    return _validate(signal.signal_type, values, {"connector": spec.connector, "columns": columns})
