"""Signal models: wire shape of ``data``, validation rules, and checks against a connector spec."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from cdclake.connectors import ConnectorKind, load_spec
from cdclake.exceptions import SignalValidationError
from cdclake.signals import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    SnapshotType,
    StopSnapshot,
    build_signal,
    checked_for_spec,
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


# ---- snapshot filters (the rules themselves: test_snapshot_filters.py) ------------------------------


def _orders_snapshot(collection: str, filter_: str, **kwargs: object) -> ExecuteSnapshot:
    signal = build_signal(
        "execute-snapshot",
        data_collections=[collection],
        additional_conditions=[{"data-collection": collection, "filter": filter_}],
        **kwargs,
    )
    assert isinstance(signal, ExecuteSnapshot)
    return signal


def test_filters_are_regenerated_in_the_connectors_dialect() -> None:
    pg = _orders_snapshot("inventory.orders", "Status = 'open' or id > 10", connector=ConnectorKind.POSTGRESQL)
    assert pg.additional_conditions[0].filter == '("status" = \'open\' OR "id" > 10)'
    my = _orders_snapshot("demo.orders", 'status = "open"', connector=ConnectorKind.MARIADB)
    assert my.additional_conditions[0].filter == "`status` = 'open'"
    assert json.loads(my.data_json() or "")["additional-conditions"][0]["filter"] == "`status` = 'open'"


def test_refused_filter_names_the_collection_and_the_reason() -> None:
    with pytest.raises(SignalValidationError) as info:
        _orders_snapshot("demo.orders", "id IN (SELECT user FROM mysql.global_priv)", connector=ConnectorKind.MYSQL)
    assert "invalid execute-snapshot signal: additional_conditions: filter of demo.orders: subqueries are not " in (
        str(info.value)
    )
    assert "`mysql`.`global_priv`" in str(info.value)


def test_without_connector_filters_are_checked_as_ansi_and_kept() -> None:
    signal = _orders_snapshot("inventory.orders", "status  =  'open'")
    assert signal.additional_conditions[0].filter == "status  =  'open'"
    with pytest.raises(SignalValidationError, match="subqueries are not allowed"):
        _orders_snapshot("inventory.orders", "id IN (SELECT 1 FROM pg_shadow)")
    with pytest.raises(SignalValidationError, match="cannot be parsed as ANSI SQL.*give it to parse the filter"):
        _orders_snapshot("demo.orders", "`status` = 'open'")


def test_mongodb_filters_are_not_sql() -> None:
    signal = _orders_snapshot("demo.orders", '{"status": "open"}', connector=ConnectorKind.MONGODB)
    assert signal.additional_conditions[0].filter == '{"status": "open"}'
    with pytest.raises(SignalValidationError, match="an incremental snapshot filter is a condition, not a SELECT"):
        _orders_snapshot("demo.orders", "SELECT * FROM demo.orders", connector=ConnectorKind.MONGODB)
    with pytest.raises(SignalValidationError, match="a blocking snapshot filter must be a full SELECT"):
        _orders_snapshot("demo.orders", "status = 'open'", type="blocking", connector=ConnectorKind.MONGODB)


def test_checked_for_spec_regenerates_filters_and_checks_columns() -> None:
    spec = load_spec("mariadb", SPEC_DIR)
    signal = _orders_snapshot("demo.orders", "status = 'open'")
    checked = checked_for_spec(signal, spec, {"demo.orders": ["id", "status"]})
    assert checked.id == signal.id
    assert isinstance(checked, ExecuteSnapshot)
    assert checked.additional_conditions[0].filter == "`status` = 'open'"
    assert checked_for_spec(checked, spec) == checked
    with pytest.raises(SignalValidationError, match="filter of demo.orders: status is not a column of demo.orders"):
        checked_for_spec(signal, spec, {"demo.orders": ["id", "total"]})
    unfiltered = build_signal("execute-snapshot", data_collections=["demo.orders"])
    assert checked_for_spec(unfiltered, spec) is unfiltered
    with pytest.raises(SignalValidationError, match="is not a table of"):
        checked_for_spec(_orders_snapshot("demo.nope", "id = 1"), spec)
