"""A backlog drained in batches ``max_records`` caps: every transaction is applied whole, however old.

* planning (pure): a cap cuts every partition at one Kafka timestamp where the log can be looked up by time, so
  the transaction topic ends where the data topics do; without that lookup (or when one millisecond holds more
  records than the cap) it is shared out in proportion;
* ages: a capped batch measures the age of a transaction its cut may leave short up to the point its cap cut it
  at, not to the wall clock, so it is held even when the backlog is days old (records after the cut may still
  complete it), while one whose END is before the cut, or one still short at the log's end, is aged up to the
  planning time;
* a two-day-old backlog of many one-event transactions then a few large two-table ones, drained live with a cap
  (the records' transaction topic is proportionally far ahead of the data topics): after every batch each
  transaction is in the lake whole or not at all, none is expired, and the lake ends as the source;
* a capped batch that crashed after a table's commit is redone with the point of its cut, read from the ledger.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.decode.records import records_from_dicts
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.offsets import TopicPartition, cap_at_time, plan_ranges
from cdclake.ingest.runner import run_capped_batch
from cdclake.ingest.sources import FrameRecordSource, source_topic_patterns
from cdclake.ingest.transactions import TxInfo, TxStatus, decide

from . import events
from .events import PgTable, Transaction, TxLog

TX, ITEMS, OTHER = ("p.transaction", 0), ("p.inventory.items", 0), ("p.inventory.other", 0)


def _log_lookup(logs: Mapping[TopicPartition, list[int]]):  # type: ignore[no-untyped-def]
    """Kafka's offsets-by-timestamp over logs given as each partition's record timestamps (ms, in order)."""
    calls = []

    def offsets_at(at_ms: int) -> dict[TopicPartition, int | None]:
        calls.append(at_ms)
        out: dict[TopicPartition, int | None] = {}
        for tp, stamps in logs.items():
            i = bisect.bisect_left(stamps, at_ms)
            out[tp] = i if i < len(stamps) else None
        return out

    return offsets_at, calls


def test_a_cap_cuts_every_partition_at_one_timestamp() -> None:
    # the transaction topic is dense early (one-event transactions: BEGIN, END), the data topics late
    t0 = 1_760_000_000_000
    logs = {
        TX: [t0 + i for i in range(0, 600, 2) for _ in (0, 1)] + [t0 + 1000, t0 + 1999],
        ITEMS: [t0 + i for i in range(0, 600, 2)] + [t0 + 1000 + i for i in range(900)],
        OTHER: [t0 + 1000 + 3 * i for i in range(300)],
    }
    wanted = {tp: (0, len(s)) for tp, s in logs.items()}
    offsets_at, calls = _log_lookup(logs)
    found = cap_at_time(wanted, 1000, offsets_at)
    assert found is not None
    ranges, at = found
    at_ms = int(at.timestamp() * 1000)
    # every partition ends at its first record at or after the cut: the transaction topic with the data topics
    for tp, (start, end) in ranges.items():
        assert start == 0 and all(s < at_ms for s in logs[tp][:end]) and all(s >= at_ms for s in logs[tp][end:])
    total = sum(e - s for s, e in ranges.values())
    one_ms_more = sum(bisect.bisect_left(s, at_ms + 1) for s in logs.values())
    assert total <= 1000 < one_ms_more  # the latest such cut
    assert ranges[TX][1] == 602 - 1  # all 300 early transactions and the BEGIN of the late one, not its END
    assert len(calls) <= 45  # a binary search

    # through plan_ranges: the cut, the partitions it ends early, and the point it cut them at
    latest = {tp: len(s) for tp, s in logs.items()}
    plan = plan_ranges({}, dict.fromkeys(logs, 0), latest, 1000, offsets_at=offsets_at)
    assert {(r.topic, r.partition): (r.start, r.end) for r in plan.ranges} == ranges
    assert plan.capped == sorted(logs) and plan.capped_at == at
    # without a lookup by time: shared out in proportion, the data topics far ahead of the transaction topic
    shared = plan_ranges({}, dict.fromkeys(logs, 0), latest, 1000)
    assert shared.capped_at is None and shared.capped == sorted(logs)
    ends = {(r.topic, r.partition): r.end for r in shared.ranges}
    assert logs[ITEMS][ends[ITEMS] - 1] - logs[TX][ends[TX] - 1] > 900  # most of a second of the source's order apart
    # uncapped: nothing is cut, nothing looked up
    calls.clear()
    whole = plan_ranges({}, dict.fromkeys(logs, 0), latest, 5000, offsets_at=offsets_at)
    assert (whole.capped, whole.capped_at, calls) == ([], None, [])


def test_a_cap_smaller_than_one_millisecond_of_records_is_shared_out_in_proportion() -> None:
    t0 = 1_760_000_000_000
    logs = {TX: [t0] * 40, ITEMS: [t0] * 60 + [t0 + 5] * 10}
    offsets_at, _ = _log_lookup(logs)
    wanted = {tp: (0, len(s)) for tp, s in logs.items()}
    assert cap_at_time(wanted, 50, offsets_at) is None
    plan = plan_ranges({}, dict.fromkeys(logs, 0), {tp: len(s) for tp, s in logs.items()}, 50, offsets_at=offsets_at)
    assert plan.capped_at is None and sum(r.count for r in plan.ranges) == 50 and plan.capped == sorted(logs)


def test_ages_of_a_capped_batch_are_measured_to_its_cut() -> None:
    """Pure: a two-day-old transaction the cut may still complete (its END not in the batch, or not before the cut)
    is held when ages are measured to the cut; one whose END is before the cut is as complete as it will ever be,
    and is judged on the planning time (mismatched), as is any in a batch read to the log's end."""
    now = datetime(2026, 1, 3, 12, 0)
    first = now - timedelta(days=2)
    age = timedelta(minutes=10)
    ends = {ITEMS: 5, TX: 10}

    def short(end_seen: bool, last: timedelta) -> dict[str, TxInfo]:
        return {
            "7": TxInfo(
                key="7",
                end_seen=end_seen,
                expected={"inventory.items": 3} if end_seen else {},
                observed={"inventory.items": 1},
                first_offsets={ITEMS: 4, TX: 8},
                last_offsets={ITEMS: 4, TX: 9 if end_seen else 8},
                first_ts=first,
                last_ts=first + last,
            )
        }

    def status(infos: dict[str, TxInfo], capped_at: datetime | None) -> tuple[TxStatus, dict[TopicPartition, int]]:
        plan = decide(infos, ends, now=now, max_incomplete_age=age, on_record_clock=False, capped_at=capped_at)
        return plan.transactions["7"].status, plan.cuts

    cut = first + timedelta(seconds=2)
    held = (TxStatus.HELD, {ITEMS: 4, TX: 8})
    assert status(short(False, timedelta(seconds=1)), cut) == held  # no END: the rest may come after the cut
    assert status(short(True, timedelta(seconds=2)), cut) == held  # END at the cut: the rest may be past it
    # END before the cut: every partition was read past it, nothing more can come
    assert status(short(True, timedelta(seconds=1)), cut) == (TxStatus.MISMATCHED, {})
    assert status(short(False, timedelta(seconds=1)), None) == (TxStatus.EXPIRED, {})  # read to the log's end
    assert status(short(True, timedelta(seconds=1)), None) == (TxStatus.MISMATCHED, {})


def _backlog(monkeypatch: pytest.MonkeyPatch, prefix: str) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Records of 40 one-event transactions, then 3 large ones over two tables, timestamped 10 ms apart two days
    ago; and the events each transaction wrote (by its number, which is every row's ``qty``)."""
    ticks = iter(range(10**6))
    start = int((datetime.now(UTC) - timedelta(days=2)).timestamp() * 1000)
    monkeypatch.setattr(events, "kafka_now_ms", lambda: start + 10 * next(ticks))
    items, other, log = PgTable(prefix, "items"), PgTable(prefix, "other"), TxLog(prefix)
    sizes: dict[int, int] = {}
    lsn = 1000
    for n in range(1, 44):
        tx = Transaction(log, 9000 + n)
        lsn += 10
        tx.begin(lsn)
        items.tx = other.tx = tx
        large = n > 40
        for i in range(30 if large else 1):
            lsn += 1
            items.create({"id": n * 100 + i, "name": f"t{n}", "qty": n}, lsn=lsn)
            if large and i % 3 == 0:
                lsn += 1
                other.create({"id": n * 100 + i, "name": f"t{n}", "qty": n}, lsn=lsn)
        lsn += 1
        tx.end(lsn)
        sizes[n] = tx.total
    return items.take() + other.take() + log.take(), sizes


def _applied(spark: SparkSession, prefix: str) -> Counter[int]:
    out: Counter[int] = Counter()
    for table in ("items", "other"):
        if spark.catalog.tableExists(f"lake.{prefix}.inventory.{table}"):
            for row in spark.sql(
                f"SELECT qty, count(*) AS n FROM lake.{prefix}.inventory.{table} GROUP BY qty"
            ).collect():
                out[row["qty"]] += row["n"]
    return out


@pytest.mark.spark
def test_a_capped_drain_of_an_old_backlog_applies_every_transaction_whole(
    spark: SparkSession, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, sizes = _backlog(monkeypatch, prefix)
    frame = records_from_dicts(spark, records)
    source = SourceConfig(name=prefix, topic_prefix=prefix)  # ages up to 600 s: the backlog is two days old
    assert source.max_incomplete_age_s == 600
    batches = []
    while True:
        summary = run_capped_batch(spark, source, FrameRecordSource(frame, source_topic_patterns(prefix)), 60)
        if summary.batch_id is None:
            break
        batches.append(summary)
        applied = _applied(spark, prefix)
        torn = {n: (got, sizes[n]) for n, got in applied.items() if got != sizes[n]}
        assert not torn, f"batch {len(batches)} applied part of transactions {torn}"
        counts = summary.transactions["counts"]
        assert counts.get("expired", 0) == counts.get("mismatched", 0) == 0, counts
        assert summary.as_dict()["checks"]["ok"], summary.as_dict()["checks"]
        assert summary.transactions["aged_to"] is not None
        assert len(batches) < 30
    assert len(batches) > 3
    # the summary says which batches the cap cut short: all but the last, which reached the partitions' ends
    assert [b.as_dict()["capped"] for b in batches] == [True] * (len(batches) - 1) + [False]
    assert _applied(spark, prefix) == Counter(sizes)


class _Crash(Exception):
    pass


@pytest.mark.spark
def test_a_capped_batch_interrupted_after_a_table_commit_is_redone_with_its_cut(
    spark: SparkSession, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first capped batch of the old backlog crashes after its first table's commit. Its redo (whatever cap the
    rerun has) reads the point its cut was at from the ledger's planned row and holds the same transactions, so
    the table it commits agrees with the one committed before the crash; measured on the wall clock, the redo
    would expire them and apply part of a transaction."""
    import cdclake.ingest.batch.apply as batch_apply
    from cdclake.ingest.batch import run_batch

    records, sizes = _backlog(monkeypatch, prefix)
    source = SourceConfig(name=prefix, topic_prefix=prefix)
    frame = records_from_dicts(spark, records)

    def crash(point: str) -> None:
        if point == "table:1":
            raise _Crash(point)

    with monkeypatch.context() as patched:
        patched.setattr(batch_apply, "crash_point", crash)
        with pytest.raises(_Crash):
            run_batch(spark, source, FrameRecordSource(frame, source_topic_patterns(prefix)), max_records=60)
    planned = spark.sql(
        f"SELECT batch_id, capped_at FROM lake.cdc_audit.batches WHERE source = '{prefix}' AND status = 'planned'"
    ).collect()
    assert len(planned) == 1 and planned[0]["capped_at"] is not None
    redo = run_batch(spark, source, FrameRecordSource(frame, source_topic_patterns(prefix)), max_records=None)
    assert redo.redo and redo.batch_id == planned[0]["batch_id"]
    counts = redo.transactions["counts"]
    assert counts["held"] > 0 and counts.get("expired", 0) == counts.get("mismatched", 0) == 0, counts
    assert datetime.fromisoformat(redo.transactions["aged_to"]) == planned[0]["capped_at"].astimezone(UTC)
    torn = {n: (got, sizes[n]) for n, got in _applied(spark, prefix).items() if got != sizes[n]}
    assert not torn, torn
    while run_capped_batch(spark, source, FrameRecordSource(frame, source_topic_patterns(prefix)), 60).batch_id:
        pass
    assert _applied(spark, prefix) == Counter(sizes)
