"""The plan phase with gaps in Kafka's logs: nothing is written for a refused gap; an accepted one is planned
(even with nothing to read), moves the ledger past it and is carried to the summary with who accepted it; a
redo reports the gaps its interrupted run accepted. The ledger, the quarantine states and Kafka are fakes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from cdclake.exceptions import OffsetGapError
from cdclake.ingest.batch import plan as plan_phase
from cdclake.ingest.batch.context import BatchContext
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchRecord
from cdclake.ingest.offsets import GapAcceptance, GapKind, OffsetGap, OffsetRange, TopicPartition
from cdclake.ingest.sources import RecordSource

T = "pg.inventory.items"


class _Log(RecordSource):
    """Kafka's watermarks, as given."""

    def __init__(
        self, earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], log_bounds: bool = True
    ) -> None:
        self.bounds = (dict(earliest), dict(latest))
        self.log_bounds = log_bounds

    def watermarks(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        return self.bounds

    def read(self, spark: Any, ranges: Any, headers: bool = True) -> Any:
        raise AssertionError("planning reads no record")


class _Ledger:
    """The last committed and interrupted rows, and the rows appended."""

    def __init__(self, committed: BatchRecord | None, pending: BatchRecord | None = None) -> None:
        self.rows = (committed, pending)
        self.appended: list[BatchRecord] = []

    def ensure(self) -> None:
        pass

    def last(self) -> tuple[BatchRecord | None, BatchRecord | None]:
        return self.rows

    def new_batch_id(self) -> str:
        return "b-2"

    def append(self, rec: BatchRecord, summary: dict[str, Any] | None = None) -> datetime:
        self.appended.append(rec)
        return datetime.now()


@pytest.fixture(autouse=True)
def _no_quarantine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_phase, "read_states", lambda spark, source: {})


class _Properties:
    """A SparkContext's local properties, all that planning asks of the session (it starts no Spark job)."""

    def __init__(self) -> None:
        self.properties: dict[str, str] = {}

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802 - SparkContext's name
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802 - SparkContext's name
        if value is None:
            self.properties.pop(key, None)
        else:
            self.properties[key] = value


class _NoSpark:
    """Stands in for the session: these tests plan without Spark (the ledger and the log are fakes too)."""

    def __init__(self) -> None:
        self.sparkContext = _Properties()


def _context(ledger: _Ledger, log: _Log, *accept: str) -> BatchContext:
    source = SourceConfig(name="pg", topic_prefix="pg", accept_gaps=GapAcceptance.parse(accept, accepted_by="alice"))
    return BatchContext(_NoSpark(), source, log, ledger)  # type: ignore[arg-type]


def _committed(offset: int) -> BatchRecord:
    return BatchRecord("pg", "b-1", 1, COMMITTED, [OffsetRange(T, 0, 0, offset)], {(T, 0): offset})


def test_a_gap_stops_the_plan_before_anything_is_written() -> None:
    ledger = _Ledger(_committed(120))
    with pytest.raises(OffsetGapError, match=r"pg\.inventory\.items\[0\]: offsets 120\.\.449 were deleted"):
        plan_phase.plan_batch(_context(ledger, _Log({(T, 0): 450}, {(T, 0): 900})))
    assert ledger.appended == []


def test_an_accepted_gap_is_planned_from_the_log_start_and_carried_with_who_accepted_it() -> None:
    ledger = _Ledger(_committed(120))
    plan = plan_phase.plan_batch(_context(ledger, _Log({(T, 0): 450}, {(T, 0): 900}), f"{T}:0"))
    assert plan is not None
    plan = plan_phase.wait_planned(plan)
    assert (plan.ranges, plan.next_offsets) == ([OffsetRange(T, 0, 450, 900)], {(T, 0): 900})
    assert [(g.gap, g.accepted_by) for g in plan.accepted_gaps] == [
        (OffsetGap(T, 0, GapKind.DELETED, 120, 450, 900), "alice")
    ]
    assert [(r.status, r.ranges, r.next_offsets) for r in ledger.appended] == [
        (PLANNED, [OffsetRange(T, 0, 450, 900)], {(T, 0): 900})
    ]


def test_an_accepted_recreated_empty_topic_runs_a_batch_that_moves_the_ledger_to_its_start() -> None:
    ledger = _Ledger(_committed(450))
    plan = plan_phase.plan_batch(_context(ledger, _Log({(T, 0): 0}, {(T, 0): 0}), T))
    assert plan is not None
    assert (plan.ranges, plan.next_offsets) == ([], {(T, 0): 0})
    assert [g.gap.kind for g in plan.accepted_gaps] == [GapKind.TRUNCATED]
    plan_phase.wait_planned(plan)


def test_without_a_gap_or_new_records_there_is_no_batch() -> None:
    ledger = _Ledger(_committed(450))
    assert plan_phase.plan_batch(_context(ledger, _Log({(T, 0): 0}, {(T, 0): 450}), T)) is None
    assert ledger.appended == []


def test_records_read_from_files_are_planned_as_before() -> None:
    ledger = _Ledger(_committed(120))
    plan = plan_phase.plan_batch(_context(ledger, _Log({(T, 0): 450}, {(T, 0): 900}, log_bounds=False)))
    assert plan is not None
    assert (plan.ranges, plan.accepted_gaps) == ([OffsetRange(T, 0, 450, 900)], ())
    plan_phase.wait_planned(plan)


def test_a_redo_reports_the_gaps_its_interrupted_run_accepted() -> None:
    pending = BatchRecord(
        "pg", "b-2", 2, PLANNED, [OffsetRange(T, 0, 450, 900)], {(T, 0): 900}, recorded_at=datetime(2024, 5, 1, 12)
    )
    plan = plan_phase.plan_batch(_context(_Ledger(_committed(120), pending), _Log({(T, 0): 450}, {(T, 0): 900})))
    assert plan is not None and plan.redo
    assert (plan.batch_id, plan.ranges, plan.next_offsets) == ("b-2", [OffsetRange(T, 0, 450, 900)], {(T, 0): 900})
    assert [(g.gap, g.accepted_by) for g in plan.accepted_gaps] == [(OffsetGap(T, 0, GapKind.DELETED, 120, 450), None)]


def test_a_redo_whose_records_were_deleted_since_stops_unless_accepted() -> None:
    pending = BatchRecord("pg", "b-2", 2, PLANNED, [OffsetRange(T, 0, 120, 900)], {(T, 0): 900})
    log = _Log({(T, 0): 450}, {(T, 0): 950})
    with pytest.raises(OffsetGapError, match=r"offsets 120\.\.449 were deleted"):
        plan_phase.plan_batch(_context(_Ledger(_committed(120), pending), log))
    plan = plan_phase.plan_batch(_context(_Ledger(_committed(120), pending), log, f"{T}:0"))
    assert plan is not None and plan.redo
    assert (plan.ranges, plan.next_offsets) == ([OffsetRange(T, 0, 450, 900)], {(T, 0): 900})
    assert [(g.gap, g.accepted_by) for g in plan.accepted_gaps] == [
        (OffsetGap(T, 0, GapKind.DELETED, 120, 450, 950), "alice")
    ]
