"""Quarantine state from held batches and release rows, release checks, and the ledger's typed columns (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cdclake.exceptions import QuarantineReleaseError
from cdclake.ingest.ledger import BATCH_COLUMNS, BatchRecord, batch_columns, table_count_rows
from cdclake.ingest.offsets import OffsetRange
from cdclake.ingest.quarantine import (
    HeldBatch,
    QuarantineState,
    ReleaseAction,
    ReleaseRecord,
    ReleaseStatus,
    check_release,
    find_state,
    quarantine_states,
    replaced_suffix,
)
from cdclake.ingest.schema import ChangeKind, ColumnChange, parse_changes, unresolved_changes

T0 = datetime(2026, 5, 1, 12, 0, 0)
TABLE = "lake.pg.inventory.items"
REASON = f"{TABLE}: cannot evolve (evolve): incompatible_type_change name: STRING -> BIGINT"


def _held(batch: str, minutes: int, records: int = 1, table: str = TABLE, source: str = "pg") -> HeldBatch:
    return HeldBatch(source, table, batch, REASON, records, T0 + timedelta(minutes=minutes))


def _release(status: ReleaseStatus, minutes: int, released: tuple[str, ...] = (), rid: str = "r1") -> ReleaseRecord:
    return ReleaseRecord(
        source="pg",
        table=TABLE,
        release_id=rid,
        action=ReleaseAction.EVOLVE,
        status=status,
        recorded_at=T0 + timedelta(minutes=minutes),
        released_batches=released,
    )


def test_held_batches_make_a_quarantined_table_until_an_applied_release_lists_them() -> None:
    held = [_held("b2", 2, 3), _held("b1", 1, 2)]
    (state,) = quarantine_states(held, []).values()
    assert (state.table, state.batches, state.records, state.since) == (
        TABLE,
        ("b1", "b2"),
        5,
        T0 + timedelta(minutes=1),
    )
    assert state.release is None and state.failure is None

    requested = _release(ReleaseStatus.REQUESTED, 3)
    assert quarantine_states(held, [requested])[("pg", TABLE)].release == requested
    applied = _release(ReleaseStatus.APPLIED, 4, released=("b1", "b2"))
    assert quarantine_states(held, [requested, applied]) == {}
    # quarantined again later: only the new batch is held, the old request is not pending any more
    (again,) = quarantine_states([*held, _held("b5", 5)], [requested, applied]).values()
    assert again.batches == ("b5",) and again.release is None


def test_a_failed_release_keeps_the_table_held_and_a_new_request_is_pending() -> None:
    held = [_held("b1", 1), _held("b3", 3)]  # b3: the batch that tried the release held its own events
    failed = _release(ReleaseStatus.FAILED, 3)
    (state,) = quarantine_states(held, [_release(ReleaseStatus.REQUESTED, 2), failed]).values()
    assert state.release is None and state.failure == failed and state.batches == ("b1", "b3")
    retry = _release(ReleaseStatus.REQUESTED, 4, rid="r2")
    later = _release(ReleaseStatus.REQUESTED, 5, rid="r3")  # a later request replaces an earlier one
    (state,) = quarantine_states(held, [failed, retry, later]).values()
    assert state.release == later


def test_outcome_rows_name_the_release_and_the_batches_they_release() -> None:
    state = QuarantineState("pg", TABLE, REASON, (_held("b1", 1, 2),), release=_release(ReleaseStatus.REQUESTED, 2))
    applied = state.outcome("b9", ReleaseStatus.APPLIED, now=T0)
    assert applied.row() == {
        "source": "pg",
        "table": TABLE,
        "release_id": "r1",
        "action": "evolve",
        "status": "applied",
        "batch_id": "b9",
        "records": 2,
        "released_batches": ["b1"],
        "detail": None,
    }
    assert state.outcome("b9", ReleaseStatus.FAILED, "still STRING", now=T0).released_batches == ()


def test_find_state_names_the_table_and_what_is_quarantined() -> None:
    states = quarantine_states([_held("b1", 1), _held("b1", 1, table="lake.pg.inventory.other", source="pg2")], [])
    assert find_state(states, "pg.inventory.items").table == TABLE  # 'lake.' is optional
    with pytest.raises(QuarantineReleaseError, match=r"lake\.pg\.inventory\.nope is not quarantined .*quarantine list"):
        find_state(states, "lake.pg.inventory.nope")
    two = quarantine_states([_held("b1", 1), _held("b1", 1, source="pg2")], [])
    with pytest.raises(QuarantineReleaseError, match="quarantined for sources pg, pg2; pass --source"):
        find_state(two, TABLE)
    assert find_state(two, TABLE, source="pg2").source == "pg2"


def test_evolve_is_refused_while_the_incompatible_column_keeps_its_old_type() -> None:
    (state,) = quarantine_states([_held("b1", 1)], []).values()
    with pytest.raises(QuarantineReleaseError) as caught:
        check_release(state, ReleaseAction.EVOLVE, {"id": "BIGINT", "name": "STRING", "qty": "INT"})
    message = str(caught.value)
    assert message.startswith(f"{TABLE}: column name is still STRING, the held events carry BIGINT.")
    assert f"ALTER TABLE {TABLE} RENAME COLUMN `name` TO `name_old`" in message
    assert f"cdclake quarantine release {TABLE} --action recreate" in message
    # altered by hand (renamed, then re-added with the new type), or recreate: accepted
    check_release(state, ReleaseAction.EVOLVE, {"id": "BIGINT", "name_old": "STRING", "name": "BIGINT"})
    check_release(state, ReleaseAction.RECREATE, {"name": "STRING"})
    with pytest.raises(QuarantineReleaseError, match="does not exist in the lake.*--action recreate"):
        check_release(state, ReleaseAction.EVOLVE, None)


def test_reasons_parse_back_into_changes() -> None:
    text = f"{TABLE}: cannot evolve (quarantine): add_column note: - -> STRING; widen_column qty: INT -> BIGINT"
    assert parse_changes(text) == [
        ColumnChange(ChangeKind.ADD, "note", None, "STRING"),
        ColumnChange(ChangeKind.WIDEN, "qty", "INT", "BIGINT"),
    ]
    decimal = parse_changes(f"{TABLE}: cannot evolve (evolve): incompatible_type_change p: DECIMAL(10,2) -> STRING")
    assert unresolved_changes(decimal, {"p": "decimal(10, 2)"}) == decimal
    assert unresolved_changes(decimal, {"p": "STRING"}) == []


def test_replaced_suffix_is_a_safe_table_name_part() -> None:
    assert replaced_suffix("20260501T120000-ab12cd34") == "__cdc_replaced_20260501T120000_ab12cd34"


def test_batch_columns_of_a_committed_and_a_planned_row() -> None:
    ranges = [OffsetRange("pg.inventory.items", 0, 10, 20), OffsetRange("pg.transaction", 0, 4, 6)]
    rec = BatchRecord("pg", "b1", 3, "committed", ranges, {("pg.inventory.items", 0): 18, ("pg.transaction", 0): 6})
    summary = {
        "records": 12,
        "dead_lettered": 1,
        "dead_lettered_by_partition": {"pg.inventory.items/0": 1},
        "tables": {
            TABLE: {
                "decoded": {"c": 5, "u": 3},
                "events": {"c": 4, "u": 3},  # one create held back (incomplete transaction)
                "applied_by_op": {"c": 4, "u": 1},
                "skipped_by_op": {"u": 1},  # and one update superseded by a later one of its key
                "quarantined": None,
                "dead_lettered": 1,
            },
            "lake.pg.inventory.other": {"decoded": {"d": 2}, "events": {"d": 2}, "quarantined": "reason"},
        },
        "transactions": {"counts": {"complete": 2, "held": 1, "mismatched": 0, "expired": 0, "empty": 4}},
        "phases_s": {"plan": 0.5, "apply": 2},
    }
    columns = batch_columns(rec, summary)
    assert list(columns) == [name for name, _ in BATCH_COLUMNS]
    assert columns["offset_ranges"] == [
        {
            "topic": "pg.inventory.items",
            "partition": 0,
            "start_offset": 10,
            "end_offset": 20,
            "next_offset": 18,
            "dead_lettered": 1,
        },
        {
            "topic": "pg.transaction",
            "partition": 0,
            "start_offset": 4,
            "end_offset": 6,
            "next_offset": 6,
            "dead_lettered": 0,
        },
    ]
    zero = {"decoded": 0, "held": 0, "applied": 0, "skipped": 0, "quarantined": 0, "dead_lettered": 0}
    assert columns["table_counts"] == [
        {**zero, "table": TABLE, "op": "c", "decoded": 5, "held": 1, "applied": 4},
        {**zero, "table": TABLE, "op": "u", "decoded": 3, "applied": 1, "skipped": 1},
        {**zero, "table": TABLE, "op": None, "dead_lettered": 1},
        {**zero, "table": "lake.pg.inventory.other", "op": "d", "decoded": 2, "quarantined": 2},
    ]
    assert (columns["records"], columns["dead_lettered"]) == (12, 1)
    assert [columns[f"tx_{s}"] for s in ("complete", "held", "mismatched", "expired")] == [2, 1, 0, 0]
    assert columns["phase_seconds"] == {"plan": 0.5, "apply": 2.0}
    planned = batch_columns(rec, None)
    assert planned["table_counts"] is None and planned["records"] is None
    assert [r["dead_lettered"] for r in planned["offset_ranges"]] == [None, None]
    assert table_count_rows({}) == []
