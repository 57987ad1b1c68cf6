"""The follower of ``cdclake ingest --follow``: when it starts a batch (pure), and its loop over a scripted record
source and a scripted batch, holding the source's lock of a real embedded lake (pyiceberg, SQLite catalog) for
each batch. Spark, Kafka and the batch itself are not involved here: the batch is scripted (it is the scheduled
mode's batch, tested on its own); the follower on the real stack: tests/integration/test_follow.py."""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cdclake.exceptions import RecordSourceError, SourceBusyError
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.follow import (
    STOPPED_BY_BATCHES,
    STOPPED_BY_SIGNAL,
    STOPPED_BY_TIME,
    FollowOptions,
    FollowReport,
    StopFlag,
    batch_due,
    batch_line,
    follow,
)
from cdclake.ingest.lock import source_lock
from cdclake.ingest.summary import BatchSummary
from cdclake.lake import LakeConfig

TP = ("pg.inventory.orders", 0)


def _locked(catalog: Any, source: str = "pg") -> bool:
    """Whether someone holds the source's lock (this process included): taking it at once fails."""
    try:
        with source_lock(catalog, source, wait_s=0):
            return False
    except SourceBusyError:
        return True


def _due(latest: dict[Any, int], seen: dict[Any, int] | None, **kw: Any) -> bool:
    args = {"cut": False, "held": False, "since_last_s": 0.0, "hold_retry_s": 30.0} | kw
    return batch_due(latest, seen, **args)


def test_a_batch_is_due_at_start_on_new_records_after_a_cut_and_after_a_hold() -> None:
    assert _due({TP: 5}, None)  # the first batch: an interrupted batch to redo, a release
    assert _due({TP: 6}, {TP: 5})
    assert _due({TP: 5, ("pg.inventory.customers", 0): 1}, {TP: 5})  # a new topic's records
    assert not _due({TP: 5}, {TP: 5})
    assert not _due({TP: 3}, {TP: 5})  # a re-created topic: the batch would stop; records make it due again
    assert _due({TP: 5}, {TP: 5}, cut=True)
    assert not _due({TP: 5}, {TP: 5}, held=True, since_last_s=29.9)
    assert _due({TP: 5}, {TP: 5}, held=True, since_last_s=30.0)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"poll_s": 0}, "poll_s"),
        ({"run_for_s": -1}, "run_for_s"),
        ({"max_batches": 0}, "max_batches"),
        ({"max_records": 0}, "max_records"),
        ({"keep_snapshots": 0}, "keep_snapshots"),
        ({"compact_every": 0}, "compact_every"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, float], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        FollowOptions(**options)


class ScriptedRecords:
    """A record source whose end offsets follow a script (one value per look; the last repeats)."""

    def __init__(self, ends: list[int | Exception]) -> None:
        self.ends = ends
        self.looks = 0

    def watermarks(self) -> tuple[dict[Any, int], dict[Any, int]]:
        end = self.ends[min(self.looks, len(self.ends) - 1)]
        self.looks += 1
        if isinstance(end, Exception):
            raise end
        return {TP: 0}, {TP: end}


class ScriptedBatches:
    """Batches that record whether the source's lock was held while they ran, and return scripted summaries."""

    def __init__(self, catalog: Any, results: list[dict[str, Any]] | None = None, stop: StopFlag | None = None):
        self.catalog, self.results, self.stop = catalog, results or [], stop
        self.locked: list[bool] = []

    def __call__(self, spark: Any, source: SourceConfig, records: Any, max_records: int | None) -> BatchSummary:
        self.locked.append(_locked(self.catalog, source.name))
        n = len(self.locked)
        spec = self.results[n - 1] if n <= len(self.results) else {}
        if spec.get("stop_during") and self.stop is not None:
            self.stop.set()  # as SIGTERM would, while the batch runs
        return BatchSummary(
            source=source.name,
            batch_id=spec.get("batch_id", f"b{n}"),
            status="committed",
            records=spec.get("records", 10),
            transactions={"counts": {"held": spec.get("held", 0)}},
            held_everything=spec.get("held_everything", False),
            capped=spec.get("capped", False),
        )


@pytest.fixture
def catalog(tmp_path: Path):  # type: ignore[no-untyped-def]
    from pyiceberg.catalog import load_catalog

    lake = LakeConfig.embedded(tmp_path / "lake")
    lake.ensure_dirs()
    return load_catalog(**lake.pyiceberg_properties())


SOURCE = SourceConfig(name="pg", topic_prefix="pg")


def _follow(catalog: Any, records: ScriptedRecords, batches: ScriptedBatches, **kw: Any) -> FollowReport:
    """The follower of source ``pg`` over scripted records and batches (no Spark: the batch is scripted)."""
    return follow(None, SOURCE, records, catalog, batches, **kw)  # type: ignore[arg-type]


def test_it_batches_when_records_arrive_holding_the_lock_and_stops_after_max_batches(catalog: Any) -> None:
    records = ScriptedRecords([5, 5, 5, 8, 8, 9])
    batches = ScriptedBatches(catalog)
    seen: list[str | None] = []
    report = _follow(
        catalog,
        records,
        batches,
        options=FollowOptions(poll_s=0.01, max_batches=3),
        on_batch=lambda b: seen.append(b.batch_id),
    )
    # batches at the first look (5), when 8 arrived and when 9 did; none while the end stayed put
    assert seen == ["b1", "b2", "b3"] and records.looks == 6
    assert batches.locked == [True, True, True]
    assert not _locked(catalog)  # released after each batch
    assert report.stopped_by == STOPPED_BY_BATCHES and report.batches == report.committed == 3
    assert report.records == 30 and report.as_dict()["checks"]["ok"]


def test_a_cut_batch_is_followed_at_once_and_a_held_one_after_hold_retry(catalog: Any) -> None:
    records = ScriptedRecords([5])  # nothing new after the first look
    batches = ScriptedBatches(
        catalog, [{"records": 3, "capped": True}, {"records": 4}, {"records": 2, "held": 1}, {"records": 0}]
    )
    report = _follow(
        catalog,
        records,
        batches,
        options=FollowOptions(poll_s=0.01, max_batches=4, max_records=4, hold_retry_s=0.2, run_for_s=10),
    )
    # cut by the cap at one timestamp (3 records): again at once; 4 records = the cap: again at once; then one
    # held: again after 0.2 s
    assert report.batches == 4
    assert records.looks >= 4 + int(0.2 / 0.01) // 2


def test_a_stop_during_a_batch_ends_the_follower_after_that_batch(catalog: Any) -> None:
    stop = StopFlag()
    batches = ScriptedBatches(catalog, [{}, {"stop_during": True}, {}], stop=stop)
    report = _follow(
        catalog,
        ScriptedRecords([1, 2, 3, 4]),
        batches,
        options=FollowOptions(poll_s=0.01),
        stop=stop,
    )
    assert report.batches == 2 and report.last is not None and report.last.batch_id == "b2"
    assert report.stopped_by == STOPPED_BY_SIGNAL and not _locked(catalog)


def test_run_for_stops_it_between_batches(catalog: Any) -> None:
    report = _follow(
        catalog,
        ScriptedRecords([1]),
        ScriptedBatches(catalog),
        options=FollowOptions(poll_s=0.01, run_for_s=0.3),
    )
    assert report.stopped_by == STOPPED_BY_TIME and report.batches == 1 and report.seconds >= 0.3


def test_kafka_unreachable_is_retried_then_raised(catalog: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cdclake.ingest.follow.MAX_WATERMARK_FAILURES", 3)
    down = RecordSourceError("cannot list topics on Kafka 127.0.0.1:1")
    recovering = ScriptedRecords([down, down, 7])
    report = _follow(
        catalog,
        recovering,
        ScriptedBatches(catalog),
        options=FollowOptions(poll_s=0.001, max_batches=1),
    )
    assert report.batches == 1 and recovering.looks == 3
    with pytest.raises(RecordSourceError, match="cannot list topics"):
        _follow(
            catalog,
            ScriptedRecords([down]),
            ScriptedBatches(catalog),
            options=FollowOptions(poll_s=0.001),
        )


def test_sigterm_sets_the_flag_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stop = StopFlag()
    with stop.on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5) and stop.reason == STOPPED_BY_SIGNAL
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_wakes_a_waiting_follower() -> None:
    stop = StopFlag()
    threading.Timer(0.05, stop.set).start()
    assert stop.wait(10)


def test_the_batch_line_says_what_was_applied_and_how_fresh_it_is() -> None:
    summary = {
        "source": "pg",
        "batch_id": "b7",
        "records": 12,
        "dead_lettered": 1,
        "tables": {"lake.pg.inventory.orders": {"applied": 9}, "lake.pg.inventory.customers": {"applied": 2}},
        "phases_s": {"plan": 0.2, "apply": 1.1},
        "source_ts": {"first": "2026-11-26T10:00:00+00:00", "last": "2026-11-26T10:00:01.500000+00:00"},
        "checks": {"problems": []},
    }
    line = batch_line(summary, now=datetime(2026, 11, 26, 10, 0, 4, tzinfo=UTC))
    assert line == (
        "batch b7: 12 records, 11 applied, 1 dead-lettered, 1.3 s, visible 2.5 s after its last source commit"
    )
    assert batch_line({"source": "pg", "batch_id": None}) == "pg: nothing new"


def test_the_run_summary_adds_up_its_batches_as_the_airflow_checks_read_a_batch_summary() -> None:
    from cdclake.ingest.summary import DeadLetterCounts, load_summary

    orders, customers = "lake.pg.inventory.orders", "lake.pg.inventory.customers"

    def batch(batch_id: str | None, tables: dict[str, dict[str, Any]], dead: int = 0) -> BatchSummary:
        return BatchSummary(
            source="pg",
            batch_id=batch_id,
            status="committed" if batch_id else "no-new-records",
            ranges={"pg.inventory.orders": {"0": [0, int(batch_id[1:]) if batch_id else 0]}},
            records=5,
            tables=tables,
            dead_letters=DeadLetterCounts({"pg.inventory.orders/0": dead}, {"pg.inventory.orders": {"bad-json": dead}}),
        )

    report = FollowReport(source="pg")
    report.add(batch("b1", {orders: {"applied": 3, "skipped": 1}, customers: {"applied": 0}}))
    report.add(batch(None, {}))
    report.add(batch("b3", {orders: {"applied": 2, "dead_lettered": 2}}, dead=2))
    report.add(batch("b4", {orders: {"applied": 0}, customers: {"applied": 4, "already_applied": True}}))
    summary = load_summary(report.as_dict())  # what check_batch, dead_letters and publish.<table> read
    assert summary.batch_id == "b4" and report.as_dict()["first_batch_id"] == "b1"
    assert summary.offsets == {"pg.inventory.orders": {"0": [0, 4]}}
    assert summary.changed(orders) and not summary.changed(customers)  # customers: applied by an earlier run
    assert summary.tables[orders] == {"batches": 2, "applied": 5, "skipped": 1, "dead_lettered": 2}
    assert summary.dead_lettered == 2 and summary.dead_letters == {"pg.inventory.orders": {"bad-json": 2}}
    assert summary.event_extra(orders)["table"]["applied"] == 5 and summary.checks.ok
    assert report.batches == 4 and report.committed == 3 and report.records == 20
