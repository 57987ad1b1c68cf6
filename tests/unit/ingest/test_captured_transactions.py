"""Transaction-consistent replay of a real PostgreSQL capture cut in the middle of a multi-table transaction.

The capture (``tests/fixtures/captures/make_tx_capture.py``, prefix ``captx``) holds a snapshot of
``inventory.tx_orders`` / ``inventory.tx_lines`` and five committed transactions with Debezium's
transaction metadata; ``pg_multi_table_tx.rows.json`` has the database's rows after each commit.
The biggest multi-table transaction (7 events, interleaved over both tables) is found from the
records' own metadata and the capture is cut inside it in two realistic ways:

* ``lsn``: every topic is cut at the same point of the WAL, the transaction's middle event: its
  BEGIN and first events of both tables are in part 1, the rest and its END in part 2;
* ``lagging_topic``: the transaction topic and ``tx_orders`` are read past the END, ``tx_lines``
  lags one event behind (its END is seen, one table is short).

Part 1 must leave none of the transaction in the lake (it is audited as ``held``), part 1 + 2 must
apply it whole, the lake must equal the database and every complete transaction must have applied
what its END announced.

Real behaviour pinned here: ``replay_files`` measures the age of an incomplete transaction on the wall
clock, so once a capture is older than ``max_incomplete_age_s`` (600 s) a transaction it cuts is
*expired* (applied as it is, reported), not held. The replays here run inside
``transactions.record_clock()`` (age measured to the batch's latest record, as a live batch at capture
time would), which makes the outcome independent of the capture's age.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.decode import DecodeOptions, decode_records, read_jsonl
from cdclake.ingest.runner import replay_files
from cdclake.ingest.transactions import TxInfo, TxStatus, decide, record_clock

from .conftest import RunBatch

pytestmark = pytest.mark.spark

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"
CAPTURE = CAPTURES / "pg_multi_table_tx.jsonl"
DB = json.loads((CAPTURES / "pg_multi_table_tx.rows.json").read_text())
TABLES = DB["tables"]  # ["inventory.tx_orders", "inventory.tx_lines"]
COLUMNS = {t: list(DB["after_snapshot"][t][0]) for t in TABLES}

Position = tuple[int, int]  # (LSN, 0 = BEGIN | 1 = data event | 2 = END)


@dataclass
class Record:
    raw: dict[str, Any]
    payload: dict[str, Any] | None

    @property
    def tp(self) -> tuple[str, int]:
        return self.raw["topic"], self.raw["partition"]

    @property
    def table(self) -> str | None:
        """``schema.table`` of a data event (None for transaction metadata and notifications)."""
        p = self.payload
        return f"{p['source']['schema']}.{p['source']['table']}" if p and "op" in p else None

    @property
    def tx(self) -> str | None:
        """The PostgreSQL transaction (the ``txId`` of Debezium's ``txId:LSN`` id)."""
        p = self.payload
        if p is None:
            return None
        tx_id = p["id"] if "status" in p else (p.get("transaction") or {}).get("id")
        return tx_id.split(":", 1)[0] if tx_id else None


def _load(prefix: str) -> list[Record]:
    # the prefix is in topics, schema names and source.name: rename it everywhere ("captx" is nothing else)
    out = []
    for line in CAPTURE.read_text().replace("captx", prefix).splitlines():
        raw = json.loads(line)
        out.append(Record(raw, json.loads(raw["value"])["payload"] if raw["value"] else None))
    return out


def _positions(records: list[Record]) -> list[Position]:
    """Where each record sits in the WAL: a data event at its LSN, a BEGIN just before its transaction's first
    event and an END just after its last one, a tombstone with its delete, notifications before everything."""
    lsns: dict[str, list[int]] = defaultdict(list)
    for r in records:
        if r.table and r.tx:
            lsns[r.tx].append(int(r.payload["source"]["lsn"]))  # type: ignore[index]
    out: list[Position] = []
    previous: dict[tuple[str, int], Position] = {}
    for r in records:
        if r.payload is None:
            pos = previous[r.tp]  # the tombstone right after its delete
        elif r.table:
            pos = (int(r.payload["source"]["lsn"]), 1)
        elif r.raw["topic"].endswith(".transaction"):
            begin = r.payload["status"] == "BEGIN"
            pos = (min(lsns[r.tx]), 0) if begin else (max(lsns[r.tx]), 2)  # type: ignore[index]
        else:
            pos = (-1, 0)
        previous[r.tp] = pos
        out.append(pos)
    return out


def _biggest_multi_table_tx(records: list[Record]) -> tuple[str, dict[str, int]]:
    ends = [r.payload for r in records if r.payload and r.payload.get("status") == "END"]
    multi = [e for e in ends if len(e["data_collections"]) > 1]
    end = max(multi, key=lambda e: e["event_count"])
    return end["id"].split(":", 1)[0], {c["data_collection"]: c["event_count"] for c in end["data_collections"]}


def _cut(records: list[Record], how: str, tx: str) -> tuple[list[Record], list[Record]]:
    pos = _positions(records)
    events = sorted((p, r) for p, r in zip(pos, records, strict=True) if r.tx == tx and r.table)
    if how == "lsn":
        middle = events[len(events) // 2][0]
        in_part1 = [p < middle for p in pos]
    else:  # lagging_topic: everything up to the END, but the table with most events misses its last one
        end = max(p for p, r in zip(pos, records, strict=True) if r.tx == tx)
        counts: dict[str, int] = defaultdict(int)
        for _, r in events:
            counts[r.table] += 1  # type: ignore[index]
        lagging = max(counts, key=lambda t: counts[t])
        last_of_lagging = max(p for p, r in events if r.table == lagging)
        topic = next(r.tp for _, r in events if r.table == lagging)  # its tombstones have no table
        in_part1 = [p < last_of_lagging if r.tp == topic else p <= end for p, r in zip(pos, records, strict=True)]
    part1 = [r for r, keep in zip(records, in_part1, strict=True) if keep]
    part2 = [r for r, keep in zip(records, in_part1, strict=True) if not keep]
    return part1, part2


def _replay(spark: SparkSession, files: list[Path], prefix: str) -> Any:
    return replay_files(spark, files, topic_prefix=prefix)  # on the records' clock (record_clock) by default


def _write(path: Path, records: list[Record]) -> Path:
    path.write_text("".join(json.dumps(r.raw) + "\n" for r in records))
    return path


def _lake(spark: SparkSession, prefix: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for table in TABLES:
        name = f"lake.{prefix}.{table}"
        cols = ", ".join(COLUMNS[table])
        out[table] = (
            [r.asDict() for r in spark.sql(f"SELECT {cols} FROM {name} ORDER BY id").collect()]
            if spark.catalog.tableExists(name)
            else []
        )
    return out


def _audit(spark: SparkSession, prefix: str) -> list[dict[str, Any]]:
    return [
        r.asDict()
        for r in spark.sql(
            "SELECT batch_id, tx_id, data_collection, expected, applied, seen, status, end_seen "
            f"FROM lake.cdc_audit.transactions WHERE source = '{prefix}' ORDER BY recorded_at, tx_id, data_collection"
        ).collect()
    ]


def _db_after(name: str) -> dict[str, list[dict[str, Any]]]:
    return next(t["rows_after"] for t in DB["transactions"] if t["name"] == name)


def test_the_capture_is_what_the_test_needs() -> None:
    """Real PostgreSQL metadata: ``txId:LSN`` ids with a different LSN in BEGIN, END and each event; END counts
    per table; partitions in WAL order (so a cut at a WAL position is a prefix of every partition)."""
    records = _load("captx")
    tx, counts = _biggest_multi_table_tx(records)
    big = next(t for t in DB["transactions"] if t["name"] == "big")
    assert tx == big["txid"]
    assert counts == big["events"] == {"inventory.tx_lines": 4, "inventory.tx_orders": 3}
    # the LSN after ":" differs: BEGIN carries the first event's, each event its own, END a later one
    mine = [r for r in records if r.tx == tx]
    lsn = {r.payload["status"]: int(r.payload["id"].split(":")[1]) for r in mine if r.table is None}
    events = sorted(int(r.payload["transaction"]["id"].split(":")[1]) for r in mine if r.table)
    assert len(set(events)) == 7
    assert events == sorted(int(r.payload["source"]["lsn"]) for r in mine if r.table)
    assert lsn["BEGIN"] == events[0] and lsn["END"] > events[-1]
    by_tx = defaultdict(int)
    for r in records:
        if r.table and r.tx:
            by_tx[r.tx] += 1
    assert by_tx == {t["txid"]: sum(t["events"].values()) for t in DB["transactions"]}
    pos = _positions(records)
    for tp in {r.tp for r in records}:
        in_tp = [p for p, r in zip(pos, records, strict=True) if r.tp == tp]
        assert in_tp == sorted(in_tp), tp


@pytest.mark.parametrize("how", ["lsn", "lagging_topic"])
def test_replay_of_a_real_capture_cut_mid_transaction(
    spark: SparkSession, prefix: str, tmp_path: Path, how: str
) -> None:
    records = _load(prefix)
    tx, end_counts = _biggest_multi_table_tx(records)
    part1, part2 = _cut(records, how, tx)

    # a realistic cut: a prefix of every partition, with some but not all of the transaction's events
    for tp in {r.tp for r in records}:
        offsets = [r.raw["offset"] for r in part1 if r.tp == tp] + [r.raw["offset"] for r in part2 if r.tp == tp]
        assert offsets == sorted(offsets), tp
    statuses = [r.payload["status"] for r in part1 if r.tx == tx and not r.table]  # type: ignore[index]
    assert statuses == (["BEGIN"] if how == "lsn" else ["BEGIN", "END"])
    seen: dict[str, int] = defaultdict(int)
    for r in part1:
        if r.tx == tx and r.table:
            seen[r.table] += 1
    assert 0 < sum(seen.values()) < sum(end_counts.values())
    if how == "lsn":
        assert all(0 < seen[t] < n for t, n in end_counts.items())  # both tables are cut
    else:
        assert seen == {"inventory.tx_orders": 3, "inventory.tx_lines": 3}
    first = _replay(spark, [_write(tmp_path / "part1.jsonl", part1)], prefix)

    assert first.transactions["ids"] == {"held": [tx]}
    assert _lake(spark, prefix) == _db_after("small")  # the snapshot and the complete transaction before it
    big_rows = _db_after("big")
    lake = _lake(spark, prefix)
    for table in TABLES:
        before = {r["id"]: r for r in lake[table]}
        for r in part1 + part2:
            if r.tx == tx and r.table == table:
                p = r.payload
                if p["op"] == "d":  # type: ignore[index]
                    assert p["before"]["id"] in before  # type: ignore[index]
                else:
                    assert p["after"] not in lake[table]  # type: ignore[index]
        assert lake[table] != big_rows[table]
    audit = _audit(spark, prefix)
    held = [a for a in audit if a["tx_id"] == tx]
    assert held and all(a["status"] == "held" and a["applied"] == 0 for a in held)
    assert {a["data_collection"] for a in held} == set(end_counts)
    assert all(a["end_seen"] is (how == "lagging_topic") for a in held)
    if how == "lagging_topic":
        assert {a["data_collection"]: (a["expected"], a["seen"]) for a in held if a["batch_id"] == first.batch_id} == {
            "inventory.tx_orders": (3, 3),
            "inventory.tx_lines": (4, 3),
        }
    assert {a["status"] for a in audit} == {"complete", "held"}  # nothing expired or mismatched
    first_txid = next(t["txid"] for t in DB["transactions"] if t["name"] == "small")
    assert {a["tx_id"] for a in audit if a["status"] == "complete"} == {first_txid}

    done = _replay(spark, [tmp_path / "part1.jsonl", _write(tmp_path / "part2.jsonl", part2)], prefix)

    assert done.transactions["ids"] == {}
    assert _lake(spark, prefix) == DB["after_stream"]
    audit = _audit(spark, prefix)
    complete = [a for a in audit if a["status"] == "complete"]
    assert all(a["expected"] == a["applied"] == a["seen"] for a in complete)
    assert {a["tx_id"] for a in complete} == {t["txid"] for t in DB["transactions"]}
    # every transaction applied once, with what its END announced
    applied: dict[tuple[str, str], int] = defaultdict(int)
    for a in complete:
        applied[(a["tx_id"], a["data_collection"])] += a["applied"]
    assert applied == {(t["txid"], dc): n for t in DB["transactions"] for dc, n in t["events"].items()}
    assert {a["data_collection"]: a["applied"] for a in complete if a["tx_id"] == tx} == end_counts
    assert {a["status"] for a in audit} == {"complete", "held"}

    again = _replay(spark, [tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"], prefix)
    assert again.batch_id is None and again.status == "no-new-records"
    assert _lake(spark, prefix) == DB["after_stream"]
    assert len(_audit(spark, prefix)) == len(audit)


def test_capture_decodes(spark: SparkSession) -> None:
    batch = decode_records(read_jsonl(spark, CAPTURE), options=DecodeOptions())
    counts = batch.counts()
    assert counts["dead_letters"] == 0
    assert counts["notifications_skipped"] == 6
    assert sorted(f"{t.namespace}.{t.table}" for t in batch.tables) == sorted(TABLES)


@pytest.mark.parametrize("reader", ["replay", "live"])
def test_an_old_capture_cut_mid_transaction(
    spark: SparkSession, prefix: str, tmp_path: Path, ingest: RunBatch, reader: str
) -> None:
    """The cut capture two days old. ``replay_files`` measures ages on the records' clock and holds the cut
    transaction, as a live batch at capture time would; a live read two days late (wall clock) finds it older
    than the age limit and applies it as it is, reported as expired."""
    records = _load(prefix)
    tx, _ = _biggest_multi_table_tx(records)
    part1, _ = _cut(records, "lsn", tx)
    two_days_ms = 2 * 24 * 3600 * 1000
    for r in part1:
        r.raw = {**r.raw, "timestamp": r.raw["timestamp"] - two_days_ms}
    path = _write(tmp_path / "old.jsonl", part1)
    summary = _replay(spark, [path], prefix) if reader == "replay" else ingest([r.raw for r in part1])
    statuses = {a["status"] for a in _audit(spark, prefix) if a["tx_id"] == tx}
    lake = _lake(spark, prefix)
    if reader == "replay":
        assert summary.transactions["ids"] == {"held": [tx]}
        assert statuses == {"held"}
        assert lake == _db_after("small")
    else:
        assert summary.transactions["ids"] == {"expired": [tx]}
        assert statuses == {"expired"}
        assert lake != _db_after("small")  # part of the transaction is in the lake
        assert {"id": 1, "customer": "ann", "status": "paid", "total_cents": 1500} in lake["inventory.tx_orders"]


def test_decide_on_the_record_clock() -> None:
    """Pure: ages up to the batch's latest transaction record instead of the planning time (never later than it)."""
    tp, txt = ("p.s.t", 0), ("p.transaction", 0)
    recorded = datetime(2026, 1, 1, 12, 0)

    def infos(shift: timedelta = timedelta(0)) -> dict[str, TxInfo]:
        done = TxInfo(
            key="1",
            end_seen=True,
            expected={"s.t": 1},
            observed={"s.t": 1},
            first_offsets={tp: 0, txt: 0},
            last_offsets={tp: 0, txt: 1},
            first_ts=recorded - timedelta(minutes=30) + shift,
            last_ts=recorded - timedelta(minutes=30) + shift,
        )
        # BEGIN and one event, 5 minutes before the last record; its END is not in the batch
        cut = TxInfo(
            key="2",
            observed={"s.t": 1},
            first_offsets={tp: 1, txt: 2},
            last_offsets={tp: 1, txt: 2},
            first_ts=recorded - timedelta(minutes=5) + shift,
            last_ts=recorded + shift,
        )
        return {"1": done, "2": cut}

    def status(now: datetime, shift: timedelta = timedelta(0), **kw: bool) -> TxStatus:
        plan = decide(infos(shift), {tp: 2, txt: 3}, now=now, max_incomplete_age=timedelta(minutes=10), **kw)
        return plan.transactions["2"].status

    days_later = recorded + timedelta(days=3)
    assert status(days_later) is TxStatus.EXPIRED  # the wall clock (live ingestion)
    assert status(days_later, on_record_clock=False) is TxStatus.EXPIRED
    assert status(days_later, on_record_clock=True) is TxStatus.HELD
    with record_clock():
        assert status(days_later) is TxStatus.HELD
    assert status(days_later) is TxStatus.EXPIRED
    # records "from the future" (a skewed producer clock) never move the planning time forward
    assert status(recorded, shift=timedelta(hours=1), on_record_clock=True) is TxStatus.HELD
    # 20 minutes after the last record: 25 minutes on the wall clock, 5 on the records' clock
    assert status(recorded + timedelta(minutes=20), shift=timedelta(minutes=-20)) is TxStatus.EXPIRED
    with record_clock():
        assert status(recorded + timedelta(minutes=20), shift=timedelta(minutes=-20)) is TxStatus.HELD
    # on the record clock a transaction still expires when the capture goes on long enough after it
    late = infos()
    late["1"].last_ts = recorded + timedelta(minutes=6)
    plan = decide(late, {tp: 2, txt: 3}, now=days_later, max_incomplete_age=timedelta(minutes=10), on_record_clock=True)
    assert plan.transactions["2"].status is TxStatus.EXPIRED
