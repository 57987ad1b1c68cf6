"""Signal models: wire shape of ``data``, validation rules, and checks against a connector spec."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from cdclake.connectors import load_spec
from cdclake.exceptions import SignalValidationError
from cdclake.signals import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    SnapshotType,
    StopSnapshot,
    build_signal,
    validate_for_spec,
)

SPEC_DIR = Path(__file__).resolve().parents[3] / "include" / "connectors"


def test_default_id_is_uuid4() -> None:
    a, b = PauseSnapshot(), PauseSnapshot()
    assert uuid.UUID(a.id).version == 4
    assert a.id != b.id


def test_execute_snapshot_incremental_data() -> None:
    signal = ExecuteSnapshot.model_validate(
        {
            "id": "ad-hoc-1",
            "data-collections": ["inventory.orders"],
            "additional-conditions": [{"data-collection": "inventory.orders", "filter": "status = 'open'"}],
            "surrogate-key": "order_no",
        }
    )
    record = signal.to_record()
    assert (record.id, record.type) == ("ad-hoc-1", "execute-snapshot")
    assert json.loads(record.data or "") == {
        "type": "incremental",
        "data-collections": ["inventory.orders"],
        "additional-conditions": [{"data-collection": "inventory.orders", "filter": "status = 'open'"}],
        "surrogate-key": "order_no",
    }


def test_execute_snapshot_blocking_needs_full_select() -> None:
    ok = build_signal(
        "execute-snapshot",
        data_collections=["inventory.orders"],
        snapshot_type="blocking",
        additional_conditions=[
            {"data-collection": "inventory.orders", "filter": "SELECT * FROM inventory.orders WHERE id > 10"}
        ],
    )
    assert isinstance(ok, ExecuteSnapshot)
    assert ok.snapshot_type is SnapshotType.BLOCKING
    with pytest.raises(SignalValidationError, match="blocking snapshot filter must be a full SELECT"):
        build_signal(
            "execute-snapshot",
            data_collections=["inventory.orders"],
            type="blocking",
            additional_conditions=[{"data-collection": "inventory.orders", "filter": "id > 10"}],
        )


def test_incremental_filter_must_not_be_select() -> None:
    with pytest.raises(SignalValidationError, match="incremental snapshot filter is a WHERE condition"):
        build_signal(
            "execute-snapshot",
            data_collections=["inventory.orders"],
            additional_conditions=[{"data-collection": "inventory.orders", "filter": "select * from x"}],
        )


def test_condition_collection_must_be_snapshotted() -> None:
    with pytest.raises(SignalValidationError, match="'inventory.customers' is not one of the data-collections"):
        build_signal(
            "execute-snapshot",
            data_collections=["inventory.orders"],
            additional_conditions=[{"data-collection": "inventory.customers", "filter": "id = 1"}],
        )


def test_empty_data_collections_rejected() -> None:
    # Debezium silently does nothing for an empty list.
    with pytest.raises(SignalValidationError, match="data_collections"):
        build_signal("execute-snapshot", data_collections=[])


def test_stop_pause_resume_log_data() -> None:
    assert StopSnapshot(id="s").data() == {"type": "incremental"}
    assert StopSnapshot(id="s", data_collections=("inventory.orders",)).data() == {
        "type": "incremental",
        "data-collections": ["inventory.orders"],
    }
    assert PauseSnapshot(id="p").to_record().data is None
    assert ResumeSnapshot(id="r").to_record().type == "resume-snapshot"
    assert json.loads(LogSignal(id="l", message="airflow at {}").data_json() or "") == {"message": "airflow at {}"}


def test_build_signal_unknown_type_and_bad_id() -> None:
    with pytest.raises(SignalValidationError, match="unknown signal type 'snapshot'"):
        build_signal("snapshot")
    with pytest.raises(SignalValidationError, match="id"):
        build_signal("pause-snapshot", id="x" * 43)


def test_build_signal_id_none_means_new_uuid() -> None:
    assert uuid.UUID(build_signal("resume-snapshot", id=None).id)


def test_validate_for_spec_names_unknown_collection_and_file() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    validate_for_spec(build_signal("execute-snapshot", data_collections=["inventory.orders"]), spec)
    with pytest.raises(SignalValidationError) as info:
        validate_for_spec(build_signal("stop-snapshot", data_collections=["inventory.nope"]), spec)
    assert "'inventory.nope' is not a table of" in str(info.value)
    assert str(SPEC_DIR / "postgres.yaml") in str(info.value)


def test_signals_are_frozen() -> None:
    signal = PauseSnapshot(id="p")
    with pytest.raises(ValueError, match="frozen"):
        signal.id = "q"  # type: ignore[misc]
