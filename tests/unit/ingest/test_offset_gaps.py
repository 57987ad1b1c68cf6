"""Planning against Kafka's log bounds: a committed offset the log no longer holds (records deleted before they
were ingested, a topic re-created or truncated) stops the batch, naming the missing offsets, unless the run
accepts it; an accepted gap starts at the log start and is reported (pure functions, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cdclake.exceptions import ConfigError, OffsetGapError
from cdclake.ingest.offsets import (
    AcceptedGap,
    GapAcceptance,
    GapKind,
    OffsetGap,
    OffsetRange,
    RangePlan,
    find_gaps,
    plan_ranges,
    planned_gaps,
    redo_ranges,
)
from cdclake.ingest.summary import BatchSummary, IngestSummary

T = "my.app.t"
U = "my.app.u"


def _accept(*values: str) -> GapAcceptance:
    return GapAcceptance.parse(values, accepted_by="alice")


# --- detection ---


def test_a_committed_offset_before_the_log_start_is_a_gap_naming_the_deleted_offsets() -> None:
    with pytest.raises(OffsetGapError) as info:
        plan_ranges({(T, 0): 120}, {(T, 0): 450}, {(T, 0): 900}, source="pg")
    assert info.value.gaps == [OffsetGap(T, 0, GapKind.DELETED, 120, 450, 900)]
    lines = str(info.value).splitlines()
    assert lines[0] == (
        "source pg: 1 topic-partition(s) cannot continue where the ledger left them: Kafka no longer holds those "
        "offsets; nothing was read:"
    )
    assert lines[1] == f"  {T}[0]: offsets 120..449 were deleted before they were ingested (log starts at 450)"
    assert f"`--accept-gap {T}:0`" in lines[2] and "`--accept-gap TOPIC` accepts every partition" in lines[2]


def test_a_committed_offset_after_the_log_end_is_a_recreated_or_truncated_topic() -> None:
    with pytest.raises(OffsetGapError) as info:
        plan_ranges({(T, 0): 450}, {(T, 0): 0}, {(T, 0): 12})
    assert info.value.gaps == [OffsetGap(T, 0, GapKind.TRUNCATED, 450, 0, 12)]
    assert str(info.value).splitlines()[1] == (
        f"  {T}[0]: the log ends at 12, before offset 450 where the source continues: the topic was re-created or "
        "its log truncated, and whatever it held from offset 450 on is gone (it now holds offsets 0..11)"
    )


def test_a_recreated_empty_topic_is_a_gap_too() -> None:
    gaps = find_gaps({(T, 0): 450}, {(T, 0): 0}, {(T, 0): 0})
    assert gaps == [OffsetGap(T, 0, GapKind.TRUNCATED, 450, 0, 0)]
    assert gaps[0].describe().endswith("is gone (it is now empty, from offset 0)")


def test_every_gap_is_named_at_once_and_partitions_at_their_bounds_are_none() -> None:
    committed = {(T, 0): 120, (T, 1): 300, (U, 0): 450, (U, 1): 10, (U, 2): 7}
    earliest = {(T, 0): 450, (T, 1): 300, (U, 0): 0, (U, 1): 0, (U, 2): 0}
    latest = {(T, 0): 900, (T, 1): 300, (U, 0): 12, (U, 1): 10, (U, 2): 9}
    with pytest.raises(OffsetGapError) as info:
        plan_ranges(committed, earliest, latest)
    assert [(g.topic, g.partition, g.kind) for g in info.value.gaps] == [
        (T, 0, GapKind.DELETED),
        (U, 0, GapKind.TRUNCATED),
    ]
    assert f"`--accept-gap {T}:0 --accept-gap {U}:0`" in str(info.value)


def test_a_topic_that_is_gone_is_no_gap() -> None:
    assert find_gaps({(T, 0): 120}, {}, {}) == []
    assert plan_ranges({(T, 0): 120}, {}, {}) == RangePlan([])


# --- acceptance ---


def test_an_accepted_gap_starts_at_the_log_start_and_is_reported() -> None:
    planned = plan_ranges({(T, 0): 120}, {(T, 0): 450}, {(T, 0): 900}, accept=_accept(f"{T}:0"))
    assert planned.ranges == [OffsetRange(T, 0, 450, 900)]
    assert planned.gaps == [OffsetGap(T, 0, GapKind.DELETED, 120, 450, 900)]
    assert planned.next_offsets({(T, 0): 120}) == {(T, 0): 900}


def test_an_accepted_recreated_topic_starts_at_its_earliest_offset() -> None:
    planned = plan_ranges({(T, 0): 450}, {(T, 0): 0}, {(T, 0): 12}, accept=_accept(T))
    assert planned.ranges == [OffsetRange(T, 0, 0, 12)]
    assert planned.gaps == [OffsetGap(T, 0, GapKind.TRUNCATED, 450, 0, 12)]
    assert planned.next_offsets({(T, 0): 450}) == {(T, 0): 12}


def test_an_accepted_gap_with_nothing_left_to_read_still_moves_the_source_to_the_log_start() -> None:
    planned = plan_ranges({(T, 0): 450}, {(T, 0): 0}, {(T, 0): 0}, accept=_accept(f"{T}:0"))
    assert planned.ranges == [] and len(planned.gaps) == 1
    assert planned.next_offsets({(T, 0): 450}) == {(T, 0): 0}


def test_the_acceptance_of_one_partition_leaves_the_others_as_they_were() -> None:
    committed = {(T, 0): 120, (T, 1): 300, (U, 0): 5}
    earliest = {(T, 0): 450, (T, 1): 0, (U, 0): 0, (U, 1): 40}
    latest = {(T, 0): 900, (T, 1): 310, (U, 0): 8, (U, 1): 50}
    planned = plan_ranges(committed, earliest, latest, accept=_accept(f"{T}:0"))
    assert planned.ranges == [
        OffsetRange(T, 0, 450, 900),
        OffsetRange(T, 1, 300, 310),
        OffsetRange(U, 0, 5, 8),
        OffsetRange(U, 1, 40, 50),  # never ingested: from the earliest offset, as always
    ]
    assert [g.topic_partition for g in planned.gaps] == [(T, 0)]
    assert planned.next_offsets(committed) == {(T, 0): 900, (T, 1): 310, (U, 0): 8, (U, 1): 50}


def test_an_acceptance_that_does_not_cover_a_gap_stops_the_batch_naming_only_that_gap() -> None:
    committed = {(T, 0): 120, (T, 1): 120}
    bounds = {(T, 0): 450, (T, 1): 450}
    with pytest.raises(OffsetGapError) as info:
        plan_ranges(committed, bounds, {(T, 0): 900, (T, 1): 900}, accept=_accept(f"{T}:1", U))
    assert [g.topic_partition for g in info.value.gaps] == [(T, 0)]
    assert f"{T}[1]" not in str(info.value)


def test_a_topic_acceptance_covers_every_partition_of_that_topic_only() -> None:
    accept = _accept(T)
    assert accept.covers(T, 0) and accept.covers(T, 7)
    assert not accept.covers(U, 0) and not accept.covers(f"{T}.x", 0)
    assert not GapAcceptance() and accept


def test_partitions_never_ingested_start_at_their_earliest_offset() -> None:
    planned = plan_ranges({}, {(T, 0): 450}, {(T, 0): 900})
    assert planned == RangePlan([OffsetRange(T, 0, 450, 900)])


def test_the_cap_is_shared_after_an_accepted_gap() -> None:
    planned = plan_ranges(
        {(T, 0): 120, (T, 1): 0}, {(T, 0): 450, (T, 1): 0}, {(T, 0): 550, (T, 1): 100}, 100, accept=_accept(T)
    )
    assert planned.ranges == [OffsetRange(T, 0, 450, 500), OffsetRange(T, 1, 0, 50)]


def test_records_in_files_are_not_log_bounds() -> None:
    # a replayed file's first and last records are not its topic's log: no gap, the first record as before
    planned = plan_ranges(
        {(T, 0): 120, (U, 0): 450}, {(T, 0): 450, (U, 0): 0}, {(T, 0): 900, (U, 0): 12}, log_bounds=False
    )
    assert planned == RangePlan([OffsetRange(T, 0, 450, 900)])


@pytest.mark.parametrize(
    ("values", "topics", "partitions"),
    [
        ([f"{T}:0"], set(), {(T, 0)}),
        ([T, f"{U}:3", f" {U}:12 "], {T}, {(U, 3), (U, 12)}),
        ([f"{T}:0, {U}", ""], {U}, {(T, 0)}),  # comma-separated; blank values accept nothing
        ([",", " "], set(), set()),
        (["db-1.inv_x.T-2:0"], set(), {("db-1.inv_x.T-2", 0)}),
    ],
)
def test_accept_gap_values(values: list[str], topics: set[str], partitions: set[tuple[str, int]]) -> None:
    accept = GapAcceptance.parse(values, accepted_by="alice")
    assert (accept.topics, accept.partitions) == (topics, partitions)
    assert accept.accepted_by == ("alice" if accept else None)


@pytest.mark.parametrize("value", [f"{T}:", f"{T}:x", f"{T}:-1", f"a:b:{T}:0", "my app:0", ":0", f"{T};{U}"])
def test_an_accept_gap_value_that_is_no_topic_partition_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="expected TOPIC:PARTITION"):
        GapAcceptance.parse([value])


def test_the_acceptance_is_recorded_as_the_current_user_unless_named() -> None:
    assert GapAcceptance.parse([T]).accepted_by
    assert GapAcceptance.parse([], accepted_by="alice") == GapAcceptance()


# --- redo of an interrupted batch ---


def test_a_redo_whose_records_were_deleted_since_it_was_planned_stops() -> None:
    ranges = [OffsetRange(T, 0, 100, 200), OffsetRange(U, 0, 0, 10)]
    with pytest.raises(OffsetGapError) as info:
        redo_ranges(ranges, {(T, 0): 200, (U, 0): 10}, {(T, 0): 150, (U, 0): 0}, {(T, 0): 300, (U, 0): 10})
    assert info.value.gaps == [OffsetGap(T, 0, GapKind.DELETED, 100, 150, 300)]
    assert "offsets 100..149 were deleted before they were ingested" in str(info.value)


def test_an_accepted_redo_reads_what_is_left_of_its_ranges() -> None:
    ranges = [
        OffsetRange(T, 0, 100, 200),
        OffsetRange(T, 1, 100, 200),
        OffsetRange(U, 0, 50, 60),
        OffsetRange(U, 1, 0, 5),
    ]
    planned_next = {(T, 0): 200, (T, 1): 200, (U, 0): 60, (U, 1): 5}
    earliest = {(T, 0): 150, (T, 1): 250, (U, 0): 0, (U, 1): 0}
    latest = {(T, 0): 300, (T, 1): 300, (U, 0): 3, (U, 1): 9}
    redo = redo_ranges(ranges, planned_next, earliest, latest, accept=_accept(T, U))
    assert redo.ranges == [OffsetRange(T, 0, 150, 200), OffsetRange(U, 1, 0, 5)]
    assert [(g.topic_partition, g.kind) for g in redo.gaps] == [
        ((T, 0), GapKind.DELETED),
        ((T, 1), GapKind.DELETED),
        ((U, 0), GapKind.TRUNCATED),
    ]
    assert redo.next_offsets(planned_next) == {(T, 0): 200, (T, 1): 250, (U, 0): 0, (U, 1): 5}


def test_an_intact_redo_keeps_its_ranges() -> None:
    ranges = [OffsetRange(T, 0, 100, 200)]
    assert redo_ranges(ranges, {(T, 0): 200}, {(T, 0): 0}, {(T, 0): 300}) == RangePlan(ranges)


def test_the_gaps_an_interrupted_batch_accepted_are_read_from_its_ledger_rows() -> None:
    committed = {(T, 0): 120, (T, 1): 300, (U, 0): 450, (U, 1): 9}
    ranges = [OffsetRange(T, 0, 450, 900), OffsetRange(T, 1, 300, 310)]
    planned_next = {(T, 0): 900, (T, 1): 310, (U, 0): 0, (U, 1): 9}
    assert planned_gaps(committed, ranges, planned_next) == [
        OffsetGap(T, 0, GapKind.DELETED, 120, 450),
        OffsetGap(U, 0, GapKind.TRUNCATED, 450, 0),
    ]
    assert planned_gaps(committed, [], committed) == []


# --- the summary ---


def test_the_summary_records_each_accepted_gap_and_warns_of_it() -> None:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    gap = AcceptedGap(OffsetGap(T, 0, GapKind.DELETED, 120, 450, 900), "alice", at)
    summary = BatchSummary(source="pg", batch_id="b-1", status="committed", accepted_gaps=[gap.as_dict()]).as_dict()
    assert summary["accepted_gaps"] == [
        {
            "topic": T,
            "partition": 0,
            "kind": "deleted",
            "committed": 120,
            "resumed_at": 450,
            "log_end": 900,
            "accepted_by": "alice",
            "accepted_at": "2024-05-01T12:00:00+00:00",
            "detail": f"{T}[0]: offsets 120..449 were deleted before they were ingested (log starts at 450)",
        }
    ]
    assert summary["checks"] == {"ok": True, "problems": []}
    read = IngestSummary.model_validate(summary)
    assert read.warnings() == [
        f"accepted gap (by alice): {T}[0]: offsets 120..449 were deleted before they were ingested (log starts at 450)"
    ]
    assert BatchSummary(source="pg", batch_id=None, status="no-new-records").as_dict()["accepted_gaps"] == []
