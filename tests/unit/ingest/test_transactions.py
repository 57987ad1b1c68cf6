"""Transaction-consistent batches: only complete transactions are applied; the rest is held, audited."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdclake.ingest.config import SourceConfig
from cdclake.ingest.offsets import OffsetRange, end_offsets
from cdclake.ingest.runner import replay_files
from cdclake.ingest.transactions import LostRecords, TxInfo, TxPlan, TxStatus, decide, tx_key_py

from .conftest import RunBatch, rows
from .events import PgTable, Transaction, TxLog

pytestmark = pytest.mark.spark


def _audit(spark: SparkSession, prefix: str) -> list[tuple]:
    return [
        tuple(r)
        for r in spark.sql(
            "SELECT batch_id, tx_id, data_collection, expected, applied, status FROM lake.cdc_audit.transactions "
            f"WHERE source = '{prefix}' ORDER BY batch_id, tx_id, data_collection"
        ).collect()
    ]


def test_transaction_cut_by_the_range_is_held_then_applied_whole(
    spark: SparkSession, prefix: str, ingest: RunBatch
) -> None:
    items, other, log = PgTable(prefix, "items"), PgTable(prefix, "other", partition=1), TxLog(prefix)
    t1 = Transaction(log, 901)
    t1.begin(100)
    items.tx = t1
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=101)
    t1.end(102)
    t2 = Transaction(log, 902)
    t2.begin(200)
    items.tx = other.tx = t2
    items.create({"id": 2, "name": "b", "qty": 2}, lsn=201)
    other.create({"id": 10, "name": "x", "qty": 1}, lsn=202)
    items.update({"id": 1, "name": "a2", "qty": 3}, lsn=203)
    # the log ends here: T2's END (and nothing else) has not arrived yet
    first = ingest(items.take(), other.take(), log.take())
    assert rows(spark, prefix) == [(1, "a", 1)]  # T1 only; none of T2 (neither id 2 nor the update of id 1)
    assert not spark.catalog.tableExists(f"lake.{prefix}.inventory.other")
    assert first.transactions["counts"]["complete"] == 1 and first.transactions["counts"]["held"] == 1
    assert first.transactions["ids"]["held"] == ["902"]
    ledger = spark.sql(
        f"SELECT next_offsets FROM lake.cdc_audit.batches WHERE source = '{prefix}' AND status = 'committed'"
    ).collect()
    # offsets stop at T2's first record in each partition: items 1, other 0, transaction topic 2 (its BEGIN)
    assert json.loads(ledger[0][0]) == {
        f"{prefix}.inventory.items": {"0": 1},
        f"{prefix}.inventory.other": {"1": 0},
        f"{prefix}.transaction": {"0": 2},
    }
    t2.end(204)
    second = ingest(log.take())
    assert rows(spark, prefix) == [(1, "a2", 3), (2, "b", 2)]
    assert rows(spark, prefix, table="other") == [(10, "x", 1)]
    assert second.transactions["counts"]["complete"] == 1 and second.transactions["counts"]["held"] == 0
    audit = _audit(spark, prefix)
    assert [a[1:] for a in audit if a[0] == first.batch_id] == [
        ("901", "inventory.items", 1, 1, "complete"),
        ("902", "inventory.items", None, 0, "held"),
        ("902", "inventory.other", None, 0, "held"),
    ]
    assert [a[1:] for a in audit if a[0] == second.batch_id] == [
        ("902", "inventory.items", 2, 2, "complete"),
        ("902", "inventory.other", 1, 1, "complete"),
    ]
    frontier = json.loads(
        spark.sql(
            f"SELECT summary['cdc.frontier'] FROM lake.{prefix}.inventory.other.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0][0]
    )
    assert frontier["tx"] == "902" and frontier["position"][0] == 203


def test_a_batch_grouped_vectorised_reads_its_transactions_in_parts_sized_to_the_driver_heap(
    spark: SparkSession, prefix: str, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above FOLD_MAX_ROWS (here 0) a batch groups its transactions vectorised, read in parts of the size the
    driver's heap gives (here 2 rows: the first batch's 5 rows in 3 parts): the same decisions as folded in Python."""
    from cdclake.ingest import transactions as tx_module
    from cdclake.ingest.batch import transactions as batch_transactions
    from cdclake.spark import driver_max_heap

    monkeypatch.setattr(tx_module, "FOLD_MAX_ROWS", 0)
    heaps: list[int] = []
    monkeypatch.setattr(batch_transactions, "facts_part_rows", lambda heap: heaps.append(heap) or 2)
    read: list[tuple[int | None, int | None]] = []
    facts = tx_module.facts
    monkeypatch.setattr(tx_module, "facts", lambda *args: read.append(args[3:]) or facts(*args))
    items, log = PgTable(prefix, "items"), TxLog(prefix)
    t1, t2 = Transaction(log, 901), Transaction(log, 902)
    for n, tx in enumerate((t1, t2), start=1):  # one insert each; T2's END has not arrived
        tx.begin(100 * n)
        items.tx = tx
        items.create({"id": n, "name": "ab"[n - 1], "qty": n}, lsn=100 * n + 1)
        if tx is t1:
            tx.end(102)
    first = ingest(items.take(), log.take())
    # the heap the JVM reports moves by a few MB as the collector resizes its survivor spaces
    assert len(heaps) == 1 and heaps[0] > 256 * 2**20 and abs(heaps[0] - driver_max_heap(spark)) < heaps[0] // 10
    assert read == [(5, 2)]  # T1's BEGIN, insert and END, T2's BEGIN and insert
    assert rows(spark, prefix) == [(1, "a", 1)]
    assert (first.transactions["counts"]["complete"], first.transactions["counts"]["held"]) == (1, 1)
    t2.end(202)
    second = ingest(log.take())
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b", 2)]
    assert second.transactions["counts"]["complete"] == 1 and len(heaps) == 2


def test_duplicates_do_not_inflate_counts(spark: SparkSession, prefix: str, ingest: RunBatch) -> None:
    items, log = PgTable(prefix, "items"), TxLog(prefix)
    tx = Transaction(log, 950)
    tx.begin(100)
    items.tx = tx
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=101)
    dup = dict(items.records[-1], offset=items.offset)  # redelivered: same event, next offset
    items.records.append(dup)
    items.offset += 1
    tx.end(102)
    summary = ingest(items.take(), log.take())
    assert summary.transactions["counts"]["complete"] == 1
    assert rows(spark, prefix) == [(1, "a", 1)]
    assert _audit(spark, prefix)[0][1:] == ("950", "inventory.items", 1, 1, "complete")


def test_missing_event_is_reported_as_a_mismatch_after_the_age_limit(
    spark: SparkSession, prefix: str, ingest: RunBatch
) -> None:
    items, log = PgTable(prefix, "items"), TxLog(prefix)
    tx = Transaction(log, 960)
    tx.begin(100)
    items.tx = tx
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=101)
    tx.end(102, counts={"inventory.items": 2})  # END promises 2 events; one never arrives
    source = SourceConfig(name=prefix, topic_prefix=prefix, max_incomplete_age_s=0)
    summary = ingest(items.take(), log.take(), source=source)
    assert summary.transactions["counts"]["mismatched"] == 1
    assert summary.as_dict()["checks"] == {"ok": False, "problems": ["transaction 960: mismatched"]}
    assert _audit(spark, prefix)[0][1:] == ("960", "inventory.items", 2, 1, "mismatched")
    assert rows(spark, prefix) == [(1, "a", 1)]  # applied as it is, and reported


def test_a_redelivered_piece_of_an_applied_transaction_does_not_hold_the_source(
    spark: SparkSession, prefix: str, ingest: RunBatch
) -> None:
    """After a Kafka Connect restart, Debezium may send again an END (or some events) of a transaction an
    earlier batch applied: a later batch applies that piece again (changing nothing) instead of holding it,
    and every transaction after it, for want of the events the earlier batch had."""
    items, log = PgTable(prefix, "items"), TxLog(prefix)
    t1 = Transaction(log, 980)
    t1.begin(100)
    items.tx = t1
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=101)
    items.create({"id": 2, "name": "b", "qty": 1}, lsn=102)
    t1.end(103)
    sent_items, sent_log = items.take(), log.take()
    first = ingest(sent_items, sent_log)
    assert first.transactions["counts"]["complete"] == 1
    # redelivered at new offsets: T1's second event and its END; then T2 updates id 2 and T3 inserts id 3
    for table, record in ((items, sent_items[-1]), (log, sent_log[-1])):
        table.records.append(dict(record, offset=table.offset))
        table.offset += 1
    t2 = Transaction(log, 981)
    t2.begin(200)
    items.tx = t2
    items.update({"id": 2, "name": "b2", "qty": 5}, lsn=201)
    t2.end(202)
    t3 = Transaction(log, 982)
    t3.begin(300)
    items.tx = t3
    items.create({"id": 3, "name": "c", "qty": 1}, lsn=301)
    t3.end(302)
    second = ingest(items.take(), log.take())
    counts = second.transactions["counts"]
    assert (counts["complete"], counts["redelivered"], counts["held"], counts["mismatched"]) == (2, 1, 0, 0)
    assert second.transactions["ids"]["redelivered"] == ["980"] and second.as_dict()["checks"]["ok"]
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b2", 5), (3, "c", 1)]  # the old event did not undo T2
    assert [a[1:] for a in _audit(spark, prefix) if a[0] == second.batch_id] == [
        ("980", "inventory.items", 2, 1, "redelivered"),
        ("981", "inventory.items", 1, 1, "complete"),
        ("982", "inventory.items", 1, 1, "complete"),
    ]
    # nothing is left to the next batch
    assert ingest().status == "no-new-records"


def test_replay_of_a_capture_cut_mid_transaction(spark: SparkSession, prefix: str, tmp_path: Path) -> None:
    items, other, log = PgTable(prefix, "items"), PgTable(prefix, "other"), TxLog(prefix)
    tx = Transaction(log, 970)
    tx.begin(100)
    items.tx = other.tx = tx
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=101)
    other.create({"id": 5, "name": "o", "qty": 1}, lsn=102)
    part1 = items.take() + other.take() + log.take()
    other.create({"id": 6, "name": "p", "qty": 2}, lsn=103)
    tx.end(104)
    part2 = other.take() + log.take()
    (tmp_path / "part1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part1))
    (tmp_path / "part2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part2))
    held = replay_files(spark, [tmp_path / "part1.jsonl"])
    assert held.transactions["ids"]["held"] == ["970"]
    assert not spark.catalog.tableExists(f"lake.{prefix}.inventory.items")
    done = replay_files(spark, [tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"])
    assert done.transactions["counts"]["complete"] == 1
    assert rows(spark, prefix) == [(1, "a", 1)]
    assert rows(spark, prefix, table="other") == [(5, "o", 1), (6, "p", 2)]
    complete = [a for a in _audit(spark, prefix) if a[5] == "complete"]
    assert complete and all(a[3] == a[4] for a in complete)


def test_decide_is_pure_and_never_splits_a_complete_transaction() -> None:
    tp = ("p.s.t", 0)
    now = datetime(2026, 1, 1)
    held = TxInfo(key="1", observed={"s.t": 1}, first_offsets={tp: 5}, last_offsets={tp: 5}, first_ts=now)
    straddling = TxInfo(
        key="2",
        end_seen=True,
        expected={"s.t": 2},
        observed={"s.t": 2},
        first_offsets={tp: 3},
        last_offsets={tp: 9},
        first_ts=now,
    )
    before = TxInfo(
        key="3",
        end_seen=True,
        expected={"s.t": 1},
        observed={"s.t": 1},
        first_offsets={tp: 1},
        last_offsets={tp: 1},
        first_ts=now,
    )
    plan = decide(
        {"1": held, "2": straddling, "3": before},
        end_offsets([OffsetRange("p.s.t", 0, 0, 10)]),
        now=now,
        max_incomplete_age=timedelta(minutes=10),
    )
    assert plan.cuts == {tp: 3}
    assert {t.key: t.status for t in plan.transactions.values()} == {
        "1": TxStatus.HELD,
        "2": TxStatus.HELD,
        "3": TxStatus.COMPLETE,
    }
    assert tx_key_py("postgresql", "920:27366088") == "920"
    assert tx_key_py("mariadb", "0-184054-374") == "0-184054-374"


def test_empty_transactions_and_signal_events_do_not_hold_anything() -> None:
    """Real Debezium: MariaDB emits BEGIN without END for transactions that touched no captured table, and END
    counts include signal-table (watermark) events that the decoder skips."""
    now = datetime(2026, 1, 1)
    tp, txt = ("p.demo.t", 0), ("p.transaction", 0)
    begin_only = TxInfo(key="0-1-7", first_offsets={txt: 0}, last_offsets={txt: 0}, first_ts=now - timedelta(hours=1))
    end_no_collections = TxInfo(
        key="0-1-8", end_seen=True, expected_total=0, first_offsets={txt: 1}, last_offsets={txt: 2}, first_ts=now
    )
    # END said demo.t: 1 + demo.debezium_signal: 2; gather() removed the signal collection
    with_signal = TxInfo(
        key="0-1-9",
        end_seen=True,
        expected_total=1,
        expected={"demo.t": 1},
        observed={"demo.t": 1},
        first_offsets={tp: 4, txt: 3},
        last_offsets={tp: 4, txt: 4},
        first_ts=now,
    )
    plan = decide(
        {t.key: t for t in (begin_only, end_no_collections, with_signal)},
        {tp: 5, txt: 5},
        now=now,
        max_incomplete_age=timedelta(minutes=10),
    )
    assert plan.cuts == {}
    assert {t.key: t.status for t in plan.transactions.values()} == {
        "0-1-7": TxStatus.EMPTY,
        "0-1-8": TxStatus.EMPTY,
        "0-1-9": TxStatus.COMPLETE,
    }
    assert plan.frontier() is None or plan.frontier().key == "0-1-9"


TP, TXT = ("p.s.t", 0), ("p.transaction", 0)
NOW = datetime(2026, 1, 1)


def _tx(
    key: str,
    *,
    expected: int | None = None,
    observed: int = 0,
    end: int | None = None,
    data: tuple[int, int] | None = None,
) -> TxInfo:
    """A transaction of collection ``s.t``: ``observed`` events at offsets ``data`` (first, last) of ``TP``, an END
    counting ``expected`` at offset ``end`` of ``TXT`` (none when ``end`` is None)."""
    first: dict[tuple[str, int], int] = {}
    last: dict[tuple[str, int], int] = {}
    if data is not None:
        first[TP], last[TP] = data
    if end is not None:
        first[TXT] = last[TXT] = end
    return TxInfo(
        key=key,
        end_seen=end is not None,
        expected={} if expected is None else {"s.t": expected},
        observed={"s.t": observed} if observed else {},
        end_at=None if end is None else (TXT, end),
        first_offsets=first,
        last_offsets=last,
        first_ts=NOW,
    )


def test_decide_asks_which_incomplete_transactions_were_applied_before() -> None:
    """Only the incomplete transactions are looked up, once; those an earlier batch applied are
    ``redelivered`` and hold nothing; the others hold their partitions as before."""
    end_only = _tx("7", expected=2, end=0)
    piece = _tx("8", observed=1, data=(0, 0))
    later = _tx("9", expected=1, observed=1, end=2, data=(1, 1))
    asked: list[list[str]] = []

    def applied_before(keys: list[str]) -> set[str]:
        asked.append(list(keys))
        return {"7"}

    def decided(*infos: TxInfo) -> dict[str, TxStatus]:
        plan = decide(
            {t.key: t for t in infos},
            {TP: 2, TXT: 3},
            now=NOW,
            max_incomplete_age=timedelta(minutes=10),
            applied_before=applied_before,
        )
        return {t.key: t.status for t in plan.transactions.values()}

    assert decided(end_only, piece, later) == {
        "7": TxStatus.REDELIVERED,
        "8": TxStatus.HELD,
        "9": TxStatus.HELD,  # it straddles the cut of 8
    }
    assert asked == [["7", "8"]]
    asked.clear()
    assert decided(end_only, later) == {"7": TxStatus.REDELIVERED, "9": TxStatus.COMPLETE}
    asked.clear()
    assert decided(later) == {"9": TxStatus.COMPLETE}
    assert asked == []  # a batch of complete transactions asks nothing


def _gap_case(
    lost_count: int | None, later_end: int, t1_after_gap: bool = True, lost_in: tuple[str, str] = ("p.s.t", "s.t")
) -> dict[str, TxStatus]:
    """T1's END (at offset 5 of the transaction topic) counts 3 events of s.t; the batch holds 2 of them
    (none when not ``t1_after_gap``), read right after a gap of ``lost_count`` records of ``lost_in`` (topic,
    collection); T2 (END at ``later_end``) has a record of s.t after them."""
    t1 = _tx("1", expected=3, end=5, **({"observed": 2, "data": (10, 11)} if t1_after_gap else {}))
    t2 = _tx("2", expected=1, observed=1, end=later_end, data=(12, 12))
    plan = decide(
        {"1": t1, "2": t2},
        {TP: 13, TXT: 8},
        now=NOW,
        max_incomplete_age=timedelta(minutes=10),
        lost=[LostRecords((lost_in[0], 0), frozenset({lost_in[1]}), lost_count)],
    )
    return {t.key: t.status for t in plan.transactions.values()}


def test_a_transaction_short_of_events_lost_in_an_accepted_gap_is_applied_as_gap() -> None:
    assert _gap_case(lost_count=1, later_end=7) == {"1": TxStatus.GAP, "2": TxStatus.COMPLETE}
    assert _gap_case(lost_count=None, later_end=7) == {"1": TxStatus.GAP, "2": TxStatus.COMPLETE}  # re-created log
    # T1's own records after the gap show its missing one was before them
    assert _gap_case(lost_count=1, later_end=4)["1"] is TxStatus.GAP
    # all of T1's events lost: T2, committed after it, has a record after the gap
    assert _gap_case(lost_count=3, later_end=7, t1_after_gap=False)["1"] is TxStatus.GAP


def test_a_transaction_whose_missing_events_may_still_come_is_held_despite_a_gap() -> None:
    # the gap lost fewer records than T1 misses
    assert _gap_case(lost_count=1, later_end=7, t1_after_gap=False) == {"1": TxStatus.HELD, "2": TxStatus.HELD}
    # nothing after the gap was committed after T1: its events may be written after the batch's read
    # (Debezium sends END and data events to different topics)
    assert _gap_case(lost_count=3, later_end=4, t1_after_gap=False)["1"] is TxStatus.HELD


def test_a_gap_in_another_collection_does_not_excuse_a_short_transaction() -> None:
    assert _gap_case(lost_count=5, later_end=7, lost_in=("p.s.u", "s.u"))["1"] is TxStatus.HELD


def test_transaction_facts_read_through_arrow_are_the_rows_collect_gives(spark: SparkSession) -> None:
    from cdclake.ingest.transactions import _collected

    frame = spark.sql(
        "SELECT * FROM VALUES "
        "('1:2', TIMESTAMP'2026-11-26 10:00:00.123456', array(CAST(5 AS DECIMAL(38,0)), CAST(9 AS DECIMAL(38,0))), "
        "array(named_struct('data_collection', 'inventory.orders', 'event_count', CAST(3 AS BIGINT))), 7), "
        "('3', CAST(NULL AS TIMESTAMP), NULL, NULL, NULL) AS t(id, ts, position, data_collections, n)"
    )
    assert _collected(frame.toArrow()) == [r.asDict(recursive=True) for r in frame.collect()]


def _facts_batch(spark: SparkSession) -> tuple[list[DataFrame], DataFrame, dict[tuple[str, int], int]]:
    """Decoded-shape change rows and BEGIN/END rows of 7 PostgreSQL transactions over two tables (s.t, s.u):
    complete ones (one with a redelivered event, one whose END counts signal events), an incomplete one in
    the middle (its END counts an s.u event the batch lacks), a complete one after it, a BEGIN without
    events, and one with more events than its END counts."""
    ts = datetime(2026, 11, 27, 10, 0)
    data: list[tuple] = []
    meta: list[tuple] = []
    offsets: dict[str, int] = {}

    def at(topic: str) -> int:
        offsets[topic] = offsets.get(topic, -1) + 1
        return offsets[topic]

    def event(tx: int, table: str, order: int, op: str = "c") -> None:
        topic = f"p.s.{table}"
        data.append(
            ("postgresql", f"{tx}:{tx * 10 + order}", order, "s", None, table, topic, 0, at(topic), ts,
             [Decimal(tx), Decimal(order)], op)
        )  # fmt: skip

    def mark(tx: int, status: str, counts: dict[str, int] | None = None) -> None:
        collections = None if counts is None else [{"data_collection": k, "event_count": v} for k, v in counts.items()]
        total = None if counts is None else sum(counts.values())
        meta.append(("p.transaction", 0, at("p.transaction"), ts, status, f"{tx}:{tx * 10}", total, collections))

    mark(100, "BEGIN"), event(100, "t", 1)
    data.append(data[-1][:8] + (at("p.s.t"),) + data[-1][9:])  # the same event redelivered
    mark(100, "END", {"s.t": 1})
    (
        mark(101, "BEGIN"),
        event(101, "t", 1),
        event(101, "u", 2),
        mark(101, "END", {"s.t": 1, "s.u": 1, "s.debezium_signal": 2}),
    )
    mark(102, "BEGIN"), event(102, "t", 1), event(102, "u", 2), mark(102, "END", {"s.t": 1, "s.u": 2})
    mark(103, "BEGIN"), event(103, "t", 1), mark(103, "END", {"s.t": 1})
    mark(104, "BEGIN")
    mark(105, "BEGIN"), event(105, "u", 1), event(105, "u", 2), mark(105, "END", {"s.u": 1})
    mark(106, "BEGIN"), event(106, "t", 1), mark(106, "END", {"s.t": 1})
    frame, transactions = _decoded(spark, data, meta)
    ends = {(t, 0): n + 1 for t, n in offsets.items()}
    return [frame], transactions, ends


def _decoded(spark: SparkSession, data: list[tuple], meta: list[tuple]) -> tuple[DataFrame, DataFrame]:
    """Change rows and BEGIN/END rows in the decoded batch's shape (the columns the transactions phase reads)."""
    frame = spark.createDataFrame(
        data,
        "_cdc_connector string, _cdc_tx_id string, _cdc_tx_total_order bigint, _cdc_schema string, _cdc_db string, "
        "_cdc_table string, _cdc_topic string, _cdc_partition int, _cdc_offset bigint, _cdc_kafka_ts timestamp, "
        "_cdc_position array<decimal(38,0)>, _cdc_op string",
    )
    transactions = spark.createDataFrame(
        meta,
        "topic string, partition int, offset bigint, kafka_ts timestamp, status string, id string, "
        "event_count bigint, data_collections array<struct<data_collection:string,event_count:bigint>>",
    )
    return frame, transactions


def test_transactions_settled_as_arrow_rows_decide_as_the_python_decision_does(spark: SparkSession) -> None:
    """Complete transactions stay Arrow rows (Settled) until a cut reaches them; the plan, its counts, frontier
    and audit rows are those of deciding every transaction in Python."""
    from cdclake.ingest.transactions import audit_rows, gather

    data, transactions, ends = _facts_batch(spark)
    now = datetime(2026, 11, 27, 10, 1)

    def plan(settle: bool) -> TxPlan:
        infos, settled = gather(data, transactions, ["s.debezium_signal"], settle=settle)
        return decide(infos, ends, now=now, max_incomplete_age=timedelta(minutes=10), settled=settled)

    fast, full = plan(True), plan(False)
    assert full.settled is None and fast.settled is not None
    assert {k: t.status for k, t in full.transactions.items()} == {
        "100": TxStatus.COMPLETE,
        "101": TxStatus.COMPLETE,
        "102": TxStatus.HELD,  # END counts 2 events of s.u, one is in the batch
        "103": TxStatus.HELD,  # complete, but after 102's first record
        "104": TxStatus.EMPTY,
        "105": TxStatus.HELD,  # two events where END counts one: mismatched, and after the cut
        "106": TxStatus.HELD,
    }
    # only what the own records left open, and what the cuts reached, became Python objects
    assert {k: t.status for k, t in fast.transactions.items()} == {
        k: t.status for k, t in full.transactions.items() if k not in ("100", "101")
    }  # 104 is empty, but its BEGIN is after the transaction topic's cut
    assert fast.cuts == full.cuts == {("p.s.t", 0): 3, ("p.s.u", 0): 1, ("p.transaction", 0): 4}
    assert fast.counts() == full.counts()
    assert fast.frontier() is not None and full.frontier() is not None
    assert (fast.frontier().key, fast.frontier().position) == (full.frontier().key, full.frontier().position)
    assert full.frontier().key == "101"
    assert fast.transactions["103"].observed == full.transactions["103"].observed == {"s.t": 1}
    assert fast.transactions["103"].last_offsets == full.transactions["103"].last_offsets

    def audit(p: TxPlan) -> list[tuple]:
        rows = audit_rows(p, "src", "b1")
        if p.settled is not None:
            rows += p.settled.audit_rows("src", "b1").to_pylist()
        return sorted(tuple(r.values()) for r in rows)

    assert audit(fast) == audit(full)
    assert ("src", "b1", "101", "s.u", 1, 1, 1, "complete", True) in audit(fast)
    # without the cut every complete transaction stays settled
    infos, settled = gather(data, transactions, ["s.debezium_signal"])
    no_cut = decide(
        infos, ends, now=now + timedelta(hours=1), max_incomplete_age=timedelta(minutes=10), settled=settled
    )
    assert no_cut.cuts == {}
    assert {k: t.status for k, t in no_cut.transactions.items()} == {
        "102": TxStatus.MISMATCHED,
        "105": TxStatus.MISMATCHED,
    }
    assert no_cut.counts()["complete"] == 4 and no_cut.counts()["empty"] == 1
    assert no_cut.frontier().key == "106"


def _edge_batch(spark: SparkSession) -> tuple[list[DataFrame], DataFrame]:
    """Rows :func:`facts` and :func:`fold` must read alike: MySQL GTIDs used whole, a database instead of a
    schema, null and repeated total orders, unequal positions (the greatest first), an END redelivered at a later offset with other
    counts, an END without collections, a transaction topic of two partitions, a connector only on later rows,
    a BEGIN only, events without BEGIN/END, and a signal collection in an END."""
    ts = datetime(2026, 11, 27, 10, 0)
    later = ts + timedelta(seconds=5)
    data = [
        ("mysql", "uuid-1:7", 1, None, "shop", "a", "m.shop.a", 0, 0, ts, [Decimal(1), Decimal(9)], "c"),
        ("mysql", "uuid-1:7", 1, None, "shop", "a", "m.shop.a", 0, 1, later, [Decimal(1), Decimal(9)], "c"),
        ("mysql", "uuid-1:7", None, None, "shop", "b", "m.shop.b", 1, 4, ts, [Decimal(2)], "u"),
        (None, "uuid-2:1", 2, None, "shop", "a", "m.shop.a", 0, 2, ts, None, None),
        ("mysql", "uuid-2:1", 3, None, "shop", "a", "m.shop.a", 0, 3, later, [Decimal(1), Decimal(10), Decimal(0)], "d"),
        ("postgresql", "55:900", 1, "public", "db", "c", "p.public.c", 0, 0, ts, [Decimal(900)], "c"),
        ("postgresql", "55:899", 2, "public", "db", "c", "p.public.c", 0, 1, ts, [Decimal(899)], "u"),
        ("postgresql", "56:902", 1, "public", None, "c", "p.public.c", 0, 2, later, [Decimal(902)], "c"),
    ]  # fmt: skip
    meta = [
        ("m.transaction", 0, 0, ts, "BEGIN", "uuid-1:7", None, None),
        ("m.transaction", 0, 1, ts, "END", "uuid-1:7", 3, [("shop.a", 1), ("shop.b", 2)]),
        ("m.transaction", 1, 5, later, "END", "uuid-1:7", 4, [("x.shop.a", 2), ("shop.b", 2), ("shop.sig", 9)]),
        ("m.transaction", 1, 2, ts, "BEGIN", "uuid-3:1", None, None),
        ("m.transaction", 0, 2, later, "END", "uuid-2:1", 0, None),
        ("p.transaction", 0, 0, ts, "BEGIN", "55:899", None, None),
        ("p.transaction", 0, 1, later, "END", "55:903", 2, [("public.c", 2), ("public.sig", None)]),
    ]
    frame, transactions = _decoded(spark, data, meta)
    return [frame], transactions


def test_a_large_batch_reads_its_transactions_in_parts_sized_to_the_driver_heap() -> None:
    """Parts of 524K rows in the default 900m heap (838.9M to the JVM), where parts of 1M rows ran it out of memory
    in a follower's 1M-record batches; 1M rows, the most, from a heap of 1.6 GB on; never fewer rows than a batch
    folded in Python has."""
    from cdclake.ingest.transactions import FACTS_PART_ROWS, FOLD_MAX_ROWS, facts_part_rows

    assert facts_part_rows(838_860_800) == 524_288
    assert facts_part_rows(2 * 1024**3) == FACTS_PART_ROWS == 1_000_000
    assert facts_part_rows(64 * 1024**2) == FOLD_MAX_ROWS


@pytest.mark.parametrize("batch", ["_facts_batch", "_edge_batch"])
def test_a_small_batch_folded_in_python_has_the_transactions_the_vectorised_grouping_gives(
    spark: SparkSession, batch: str
) -> None:
    """:func:`fold` (a small batch's path, row by row) gives every transaction as :func:`facts` (grouped vectorised)
    does, field by field; gather takes it up to FOLD_MAX_ROWS rows, and the decision is the same."""
    from cdclake.ingest.transactions import FOLD_MAX_ROWS, fold, gather

    data, transactions = globals()[batch](spark)[:2]
    ignored = ["s.debezium_signal", "shop.sig", "public.sig"]
    aggregated, none = gather(data, transactions, ignored, settle=False)
    assert none is None and len(aggregated) >= 5
    assert fold(data, transactions, ignored) == aggregated
    unasked = lambda: pytest.fail("a batch folded in Python asks no part size")  # noqa: E731
    assert gather(data, transactions, ignored, rows=FOLD_MAX_ROWS, part_rows=unasked) == (aggregated, None)
    assert gather(data, transactions, ignored, rows=FOLD_MAX_ROWS + 1)[1] is not None  # grouped vectorised
    assert fold(data, None) == gather(data, None, settle=False)[0]
    assert fold([], transactions, ignored) == gather([], transactions, ignored, settle=False)[0]
    parts = pytest.MonkeyPatch.context()
    with parts as patch:  # read and grouped in parts, split by transaction: the same transactions
        patch.setattr("cdclake.ingest.transactions.FACTS_PART_ROWS", FOLD_MAX_ROWS // 3 + 1)  # in 3 parts
        assert gather(data, transactions, ignored, settle=False, rows=FOLD_MAX_ROWS + 1) == (aggregated, None)
    parted = gather(
        data, transactions, ignored, settle=False, rows=FOLD_MAX_ROWS + 1, part_rows=lambda: FOLD_MAX_ROWS // 4
    )
    assert parted == (aggregated, None)  # 5 parts, as a driver's heap sizes them
    if batch == "_edge_batch":
        one = aggregated["uuid-1:7"]
        assert one.expected == {"shop.a": 2, "shop.b": 2} and one.expected_total == -5  # the later END, 4 - 9
        assert one.end_at == (("m.transaction", 1), 5) and one.observed == {"shop.a": 1, "shop.b": 0}
        assert aggregated["uuid-2:1"].connector == "mysql" and aggregated["uuid-2:1"].ops == {"d"}
        assert aggregated["uuid-2:1"].position == [1, 10, 0]
        assert aggregated["55"].expected_total == 2 and aggregated["55"].observed == {"public.c": 2}
        assert aggregated["55"].position == [900]  # the greatest, not the last


@pytest.mark.parametrize(
    "positions, greatest",
    [
        ([[5, 1], [5, 2], [4, 9]], 1),
        ([[5], [5, 0], [4, 9, 9]], 1),  # a longer list with an equal prefix is greater, as in Python
        ([[], [0]], 1),
        ([[7, 7], [7, 7]], 0),
    ],
)
def test_the_greatest_position_is_found_over_arrow_columns(positions: list[list[int]], greatest: int) -> None:
    import pyarrow as pa

    from cdclake.ingest.transactions import _greatest

    column = pa.array([[Decimal(x) for x in p] for p in positions], pa.list_(pa.decimal128(38, 0)))
    assert _greatest(column) == greatest == positions.index(max(positions))


def test_the_vectorised_grouping_of_interleaved_rows_without_spark() -> None:
    """facts_of on Arrow rows alone: rows of two transactions interleaved, a redelivered event and a null total
    order counted as distinct events (not twice, not at all), the greatest position of unequal lengths, offsets per
    partition, the END with the greatest offset, and a transaction with BEGIN/END only."""
    import pyarrow as pa

    from cdclake.ingest.transactions import facts_of

    ts = pa.timestamp("us", tz="UTC")
    position = pa.list_(pa.decimal128(38, 0))
    events = pa.table(
        {
            "tx": ["a", "b", "a", "a", "b", "a"],
            "total_order": [1, 1, 2, 2, None, None],
            "dc": ["s.t", "s.t", "s.t", "s.t", "s.u", "s.t"],
            "topic": ["p.s.t", "p.s.t", "p.s.t", "p.s.t", "p.s.u", "p.s.t"],
            "partition": pa.array([0, 0, 1, 1, 0, 0], pa.int32()),
            "offset": [10, 11, 3, 4, 7, 12],
            "ts": pa.array([5, 1, 9, 2, 3, None], ts),
            "position": pa.array(
                [
                    [Decimal(1), Decimal(9)],
                    [Decimal(2)],
                    [Decimal(1), Decimal(10), Decimal(0)],
                    None,
                    [Decimal(1)],
                    None,
                ],
                position,
            ),
            "op": ["c", "u", "u", "u", None, "d"],
            "connector": [None, "postgresql", "postgresql", None, "postgresql", None],
        }
    )
    markers = pa.table(
        {
            "tx": ["a", "a", "c", "c", "a"],
            "topic": ["p.transaction"] * 5,
            "partition": pa.array([0, 0, 0, 0, 1], pa.int32()),
            "offset": [0, 5, 6, 7, 2],
            "kafka_ts": pa.array([0, 8, 4, 4, 7], ts),
            "status": ["BEGIN", "END", "BEGIN", "END", "END"],
            "event_count": [None, 2, None, 0, 9],
            "data_collections": pa.array(
                [None, [("x.s.t", 2), ("s.sig", 4)], None, [], [("s.t", 9)]],
                pa.list_(pa.struct([("data_collection", pa.string()), ("event_count", pa.int64())])),
            ),
        }
    )
    rows = {r["tx"]: r for r in facts_of(events, markers, {"s.sig"}).to_pylist()}
    a, b, c = rows["a"], rows["b"], rows["c"]
    assert {(o["dc"], o["n"]) for o in a["observed"]} == {("s.t", 2)}  # 1, 2, 2 again, and a null
    assert a["position"] == [Decimal(1), Decimal(10), Decimal(0)] and b["position"] == [Decimal(2)]
    assert sorted(a["ops"]) == ["c", "d", "u"] and a["connector"] == "postgresql"
    assert sorted((o["topic"], o["partition"], o["first"], o["last"]) for o in a["offsets"]) == [
        ("p.s.t", 0, 10, 12),
        ("p.s.t", 1, 3, 4),
        ("p.transaction", 0, 0, 5),
        ("p.transaction", 1, 2, 2),
    ]
    assert a["first_ts"].timestamp() * 1e6 == 0 and a["last_ts"].timestamp() * 1e6 == 9
    assert (a["end_topic"], a["end_partition"], a["end_offset"]) == ("p.transaction", 0, 5)  # greatest offset
    assert a["expected"] == [{"dc": "s.t", "n": 2}] and a["expected_total"] == -2  # 2 - the signal table's 4
    assert a["own"] is None  # its total is not its events'
    assert {(o["dc"], o["n"]) for o in b["observed"]} == {("s.t", 1), ("s.u", 0)} and not b["end_seen"]
    assert b["own"] is None and b["expected"] == [] and b["expected_total"] is None
    assert c["observed"] == [] and c["ops"] is None and c["position"] is None and c["own"] == "empty"
    assert facts_of(None, None) is None and facts_of(events.slice(0, 0), None) is None
