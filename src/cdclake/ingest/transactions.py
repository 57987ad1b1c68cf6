"""Transaction-consistent batches from Debezium's transaction metadata (``<topic.prefix>.transaction``).

A transaction is **complete** in a batch when its END event is in the batch and, for every data
collection the END lists, the batch holds exactly that many distinct data events (distinct by the
event's ``transaction.total_order``, so a redelivered event does not count twice). A batch applies
only complete transactions: every topic-partition is cut at the first record (data event, BEGIN or
END) of a transaction that is not complete, repeatedly until no complete transaction straddles a
cut, and nothing at or after a cut is applied or committed; the next batch starts at the cuts.

A transaction that stays incomplete longer than ``max_incomplete_age`` (measured from its first
record's Kafka timestamp to the batch's planning time, so a redo decides the same way) is applied as
it is and reported as ``expired`` instead of stalling the source forever. An END whose count is
exceeded, or that is still short when the transaction expires, is ``mismatched``. Measured on the
wall clock, every incomplete transaction of a capture older than ``max_incomplete_age`` expires when
it is replayed; inside :func:`record_clock` "now" is the batch's latest record instead, so a capture
cut inside a transaction days ago holds it, as a live batch at capture time would have.

Two kinds of incomplete transaction are applied as they are, because waiting cannot complete them:

* ``redelivered``: a piece (its END alone, or some of its events) of a transaction an earlier batch already
  applied, delivered again after a Kafka Connect restart or a producer retry, or the late rest of a
  transaction applied ``expired``. Whether an earlier batch applied it is asked of ``cdc_audit.transactions``
  (the ``applied_before`` lookup of :func:`decide`) only for the batch's incomplete transactions. Its events
  are older than, or as old as, what the lake holds, so applying them changes nothing; the rest of an expired
  transaction is newer and is applied.
* ``gap``: a transaction whose END counts events lost in a gap the run accepted (``--accept-gap``,
  :class:`LostRecords`). It is judged lost, not late, only when the batch proves its events cannot still
  come: its shortfall is in the collections of the gap's partitions, is no larger than what the gap lost,
  and a transaction whose END is at or after its own has records in that partition after the gap (Debezium
  writes a partition in commit order, so the missing events were in the gap). Otherwise it is held, and
  expires like any other.

A MySQL/MariaDB TRUNCATE is a statement committed on its own: Debezium emits its BEGIN and the truncate event,
never an END. A transaction of a binlog connector whose only events are truncates is complete as it is.

Transaction ids: PostgreSQL (and Informix) put ``<txId>:<LSN>`` in events, with a different LSN in
BEGIN, END and each change: they are grouped by the part before ``:``. MySQL/MariaDB ids (GTID or
``file=…,pos=…``) are used whole.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.ingest.offsets import TopicPartition

SPLIT_ID_CONNECTORS = ("postgresql", "informix")
#: Connectors whose TRUNCATE is a transaction of its own without an END event (see the module docstring).
BINLOG_CONNECTORS = ("mysql", "mariadb")
_SPLIT_ID = re.compile(r"\d+:\d+")
_RECORD_CLOCK: ContextVar[bool] = ContextVar("cdclake_tx_record_clock", default=False)


@contextmanager
def record_clock() -> Iterator[None]:
    """Within the block, :func:`decide` measures transaction ages on the records' clock (for replays).

    "Now" becomes the latest Kafka timestamp of the batch's transaction records when that is earlier
    than the planning time: recorded files are replayed as if read when they were recorded, and a
    redo (same records) still decides the same way. ``replay_files`` runs inside it; live ingestion
    keeps the wall clock, so a transaction stuck at the end of an idle source still expires. On this
    clock a transaction that cannot complete inside the files is held, not expired, unless the files go
    on for ``max_incomplete_age`` after it (a transaction larger than ``max_records`` is not one of
    those: :func:`cdclake.ingest.runner.run_capped_batch` grows the cap until it fits).
    """
    token = _RECORD_CLOCK.set(True)
    try:
        yield
    finally:
        _RECORD_CLOCK.reset(token)


class TxStatus(StrEnum):
    COMPLETE = "complete"
    EMPTY = "empty"
    HELD = "held"
    EXPIRED = "expired"
    MISMATCHED = "mismatched"
    #: a piece of a transaction an earlier batch applied (module docstring): applied as is
    REDELIVERED = "redelivered"
    #: short of events lost in a gap the run accepted (module docstring): applied as is
    GAP = "gap"


#: Statuses whose events a batch applies.
APPLIED = frozenset({TxStatus.COMPLETE, TxStatus.EXPIRED, TxStatus.MISMATCHED, TxStatus.REDELIVERED, TxStatus.GAP})


@dataclass(frozen=True)
class LostRecords:
    """Records of one topic-partition lost in a gap the run accepted.

    Attributes:
        partition: the topic-partition.
        collections: the data collections (``<schema-or-db>.<table>``) whose events the topic carries.
        count: how many records were lost; None when unknown (a truncated or re-created log).
    """

    partition: TopicPartition
    collections: frozenset[str]
    count: int | None


def tx_key(connector: Column, tx_id: Column) -> Column:
    """The transaction part of an id (see module docstring)."""
    return F.when(F.lower(connector).isin(*SPLIT_ID_CONNECTORS), F.split(tx_id, ":").getItem(0)).otherwise(tx_id)


def tx_key_py(connector: str | None, tx_id: str) -> str:
    """Python twin of :func:`tx_key`."""
    return tx_id.split(":", 1)[0] if (connector or "").lower() in SPLIT_ID_CONNECTORS else tx_id


def collection_name(name: str) -> str:
    """Normalise a data collection to ``<schema-or-db>.<table>`` (its last two parts)."""
    return ".".join(name.split(".")[-2:])


@dataclass
class TxInfo:
    """Everything the batch knows about one transaction."""

    key: str
    ids: set[str] = field(default_factory=set)
    end_seen: bool = False
    expected_total: int | None = None
    expected: dict[str, int] = field(default_factory=dict)
    observed: dict[str, int] = field(default_factory=dict)
    first_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    last_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    position: list[int] | None = None
    status: TxStatus = TxStatus.HELD
    #: the ops of its data events, and the connector that emitted them
    ops: set[str] = field(default_factory=set)
    connector: str | None = None
    #: where its END event is (transaction topic-partition, offset)
    end_at: tuple[TopicPartition, int] | None = None

    def add_offset(self, tp: TopicPartition, first: int, last: int | None = None) -> None:
        self.first_offsets[tp] = min(first, self.first_offsets.get(tp, first))
        last = first if last is None else last
        self.last_offsets[tp] = max(last, self.last_offsets.get(tp, last))

    def add_ts(self, ts: datetime | None, last: datetime | None = None) -> None:
        if ts is not None and (self.first_ts is None or ts < self.first_ts):
            self.first_ts = ts
        last = ts if last is None else last
        if last is not None and (self.last_ts is None or last > self.last_ts):
            self.last_ts = last


@dataclass
class TxPlan:
    """The decision for one batch."""

    transactions: dict[str, TxInfo]
    cuts: dict[TopicPartition, int]
    enabled: bool

    def frontier(self) -> TxInfo | None:
        """The applied transaction with the greatest position (the consistent cut readers can use)."""
        applied = [t for t in self.transactions.values() if t.status in APPLIED and t.position]
        return max(applied, key=lambda t: t.position or [], default=None)

    @property
    def held(self) -> list[TxInfo]:
        return [t for t in self.transactions.values() if t.status is TxStatus.HELD]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in TxStatus}
        for tx in self.transactions.values():
            out[tx.status.value] += 1
        return out


def _collected(frame: DataFrame) -> list[dict[str, Any]]:
    """``frame``'s rows as dicts, through Arrow (several times faster than ``collect()``'s rows for the
    hundreds of thousands of transactions of a large batch). Timestamps come back as ``collect()`` gives
    them: naive, in the process's local time zone."""
    table = frame.toArrow()
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            table = table.set_column(i, f.name, pc.local_timestamp(table.column(i)))
    return table.to_pylist()


def gather(
    data: Iterable[DataFrame], transactions: DataFrame | None, ignore_collections: Iterable[str] = ()
) -> dict[str, TxInfo]:
    """Collect per-transaction facts (small Spark aggregations, collected to the driver).

    Args:
        data: decoded change rows of every table.
        transactions: decoded BEGIN/END events (None: the batch has none, known from its counts).
        ignore_collections: data collections whose events are not in ``data`` (the signaling table:
            its rows are skipped by the decoder but counted in END events); removed from the END counts.
    """
    ignored = {collection_name(c) for c in ignore_collections}
    infos: dict[str, TxInfo] = {}

    def info(key: str) -> TxInfo:
        return infos.setdefault(key, TxInfo(key=key))

    frames = [
        d.where(F.col("_cdc_tx_id").isNotNull()).select(
            tx_key(F.col("_cdc_connector"), F.col("_cdc_tx_id")).alias("tx"),
            F.col("_cdc_tx_id").alias("id"),
            F.col("_cdc_tx_total_order").alias("total_order"),
            F.concat_ws(".", F.coalesce(F.col("_cdc_schema"), F.col("_cdc_db")), F.col("_cdc_table")).alias("dc"),
            F.col("_cdc_topic").alias("topic"),
            F.col("_cdc_partition").alias("partition"),
            F.col("_cdc_offset").alias("offset"),
            F.col("_cdc_kafka_ts").alias("ts"),
            F.col("_cdc_position").alias("position"),
            F.col("_cdc_op").alias("op"),
            F.col("_cdc_connector").alias("connector"),
        )
        for d in data
    ]
    if frames:
        events = frames[0]
        for other in frames[1:]:
            events = events.unionByName(other)
        counted = events.groupBy("tx", "dc").agg(
            F.count_distinct("total_order").alias("n"),
            F.max("position").alias("position"),
            F.collect_set("op").alias("ops"),
            F.first("connector").alias("connector"),
        )
        for row in _collected(counted):
            tx = info(row["tx"])
            tx.observed[collection_name(row["dc"])] = int(row["n"])
            tx.ops.update(row["ops"] or [])
            tx.connector = tx.connector or row["connector"]
            position = [int(x) for x in row["position"]]
            tx.position = position if tx.position is None else max(tx.position, position)
        per_tp = events.groupBy("tx", "topic", "partition").agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.min("ts").alias("ts"),
            F.max("ts").alias("last_ts"),
            F.first("id").alias("id"),
        )
        for row in _collected(per_tp):
            tx = info(row["tx"])
            tx.add_offset((row["topic"], int(row["partition"])), int(row["first"]), int(row["last"]))
            tx.add_ts(row["ts"], row["last_ts"])
            tx.ids.add(row["id"])
    if transactions is None:
        return infos
    meta = _collected(
        transactions.select(
            "topic",
            "partition",
            "offset",
            "kafka_ts",
            "status",
            "id",
            "event_count",
            "data_collections",
            F.regexp_replace("topic", r"\.transaction$", "").alias("server"),
        )
    )
    for row in meta:
        # BEGIN/END carry no connector: "<digits>:<digits>" is the PostgreSQL/Informix style
        # (a MySQL GTID "<uuid>:<n>" is used whole, like in its data events)
        key = row["id"].split(":", 1)[0] if _SPLIT_ID.fullmatch(row["id"]) else row["id"]
        tx = info(key)
        tx.ids.add(row["id"])
        tx.add_offset((row["topic"], int(row["partition"])), int(row["offset"]))
        tx.add_ts(row["kafka_ts"])
        if row["status"] == "END":
            tx.end_seen = True
            tx.end_at = ((row["topic"], int(row["partition"])), int(row["offset"]))
            skipped = 0
            for dc in row["data_collections"] or []:
                name = collection_name(dc["data_collection"])
                if name in ignored:
                    skipped += int(dc["event_count"])
                else:
                    tx.expected[name] = int(dc["event_count"])
            tx.expected_total = None if row["event_count"] is None else int(row["event_count"]) - skipped
    return infos


def decide(
    infos: Mapping[str, TxInfo],
    ranges_end: Mapping[TopicPartition, int],
    *,
    now: datetime,
    max_incomplete_age: timedelta,
    enabled: bool = True,
    on_record_clock: bool | None = None,
    applied_before: Callable[[Sequence[str]], Collection[str]] | None = None,
    lost: Sequence[LostRecords] = (),
) -> TxPlan:
    """Statuses and partition cuts (pure when ``on_record_clock`` is given and ``applied_before`` is).

    Args:
        infos: from :func:`gather`.
        ranges_end: end offset of every partition read in the batch.
        now: the batch's planning time.
        max_incomplete_age: age after which an incomplete transaction is applied and reported.
        enabled: transaction-consistent mode; when False everything is applied as is.
        on_record_clock: measure ages up to the latest record of ``infos`` instead of ``now`` when that
            is earlier (replays); None: as set by :func:`record_clock`.
        applied_before: given the keys of the batch's incomplete transactions, those an earlier batch
            applied (called at most once, only when some transaction is incomplete); None: none were.
        lost: the records lost in the gaps the run accepted.
    """
    if _RECORD_CLOCK.get() if on_record_clock is None else on_record_clock:
        latest = max((t.last_ts for t in infos.values() if t.last_ts is not None), default=None)
        if latest is not None and latest < now:
            now = latest
    incomplete = []
    for tx in infos.values():
        tx.status = _own_status(tx)
        if tx.status is TxStatus.HELD:
            incomplete.append(tx)
    earlier: set[str] = set()
    if incomplete and enabled and applied_before is not None:
        earlier = set(applied_before(sorted(t.key for t in incomplete)))
    for tx in incomplete:
        if tx.key in earlier:
            tx.status = TxStatus.REDELIVERED
        elif not enabled:
            tx.status = TxStatus.COMPLETE if tx.end_seen else TxStatus.EXPIRED
        elif _lost_in_gap(tx, infos, lost):
            tx.status = TxStatus.GAP
        elif tx.first_ts is not None and now - tx.first_ts > max_incomplete_age:
            tx.status = TxStatus.MISMATCHED if tx.end_seen else TxStatus.EXPIRED
    cuts: dict[TopicPartition, int] = {}
    if not enabled:
        return TxPlan(dict(infos), cuts, enabled)
    changed = True
    while changed:
        changed = False
        for tx in infos.values():
            if tx.status is TxStatus.HELD:
                for tp, first in tx.first_offsets.items():
                    if first < cuts.get(tp, ranges_end.get(tp, first + 1)):
                        cuts[tp] = first
                        changed = True
        for tx in infos.values():
            if tx.status in APPLIED and any(tp in cuts and last >= cuts[tp] for tp, last in tx.last_offsets.items()):
                tx.status = TxStatus.HELD
                changed = True
    return TxPlan(dict(infos), cuts, enabled)


def _own_status(tx: TxInfo) -> TxStatus:
    """What ``tx``'s own records say: empty, complete, mismatched (more events than its END counts), or held."""
    observed_total = sum(tx.observed.values())
    if not tx.observed and not tx.expected:
        # BEGIN without END, or an END listing no captured collection: Debezium's binlog connectors
        # emit BEGIN for transactions that touched no captured table (and no END); nothing to apply
        return TxStatus.EMPTY
    if (
        tx.end_seen
        and set(tx.observed) <= set(tx.expected)
        and all(tx.observed.get(dc, 0) == n for dc, n in tx.expected.items())
        and (tx.expected_total is None or observed_total == tx.expected_total)
    ):
        return TxStatus.COMPLETE
    if tx.end_seen and (
        bool(set(tx.observed) - set(tx.expected))
        or any(tx.observed.get(dc, 0) > n for dc, n in tx.expected.items())
        or (tx.expected_total is not None and observed_total > tx.expected_total)
    ):
        return TxStatus.MISMATCHED
    if not tx.end_seen and tx.ops == {"t"} and (tx.connector or "").lower() in BINLOG_CONNECTORS:
        return TxStatus.COMPLETE  # a binlog TRUNCATE: no END ever comes (module docstring)
    return TxStatus.HELD


def _lost_in_gap(tx: TxInfo, infos: Mapping[str, TxInfo], lost: Sequence[LostRecords]) -> bool:
    """Whether the events ``tx``'s END counts and the batch lacks were lost in an accepted gap (module
    docstring): every short collection is carried by a gap's partition, the gaps lost at least that many
    records, and in one of those partitions a transaction whose END is at or after ``tx``'s has records."""
    if not tx.end_seen or tx.end_at is None or not lost:
        return False
    end_tp, end_offset = tx.end_at
    later_in = {
        tp
        for other in infos.values()
        if other.end_at is not None and other.end_at[0] == end_tp and other.end_at[1] >= end_offset
        for tp in other.first_offsets
    }
    for dc, expected in tx.expected.items():
        missing = expected - tx.observed.get(dc, 0)
        if missing <= 0:
            continue
        gaps = [g for g in lost if dc in g.collections]
        counts = [g.count for g in gaps]
        if not gaps or (None not in counts and sum(c or 0 for c in counts) < missing):
            return False
        if not any(g.partition in later_in for g in gaps):
            return False
    return True


def before_cuts(
    frame: DataFrame,
    cuts: Mapping[TopicPartition, int],
    topic: str = "_cdc_topic",
    partition: str = "_cdc_partition",
    offset: str = "_cdc_offset",
) -> DataFrame:
    """Rows strictly before their partition's cut (all rows of partitions without a cut)."""
    if not cuts:
        return frame
    held: Column = F.lit(False)
    for (t, p), cut in cuts.items():
        held = held | ((F.col(topic) == t) & (F.col(partition) == p) & (F.col(offset) >= cut))
    return frame.where(~held)


def audit_rows(plan: TxPlan, source: str, batch_id: str) -> list[dict[str, Any]]:
    """Rows for ``cdc_audit.transactions``: one per transaction and data collection."""
    out = []
    for tx in sorted(plan.transactions.values(), key=lambda t: t.key):
        if tx.status is TxStatus.EMPTY:
            continue
        collections = sorted(set(tx.expected) | set(tx.observed)) or [""]
        for dc in collections:
            out.append(
                {
                    "source": source,
                    "batch_id": batch_id,
                    "tx_id": tx.key,
                    "data_collection": dc,
                    "expected": tx.expected.get(dc) if tx.end_seen else None,
                    "applied": tx.observed.get(dc, 0) if tx.status in APPLIED else 0,
                    "seen": tx.observed.get(dc, 0),
                    "status": tx.status.value,
                    "end_seen": tx.end_seen,
                }
            )
    return out


def cut_offsets(
    next_offsets: Mapping[TopicPartition, int], cuts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Next offsets after applying ``cuts``."""
    out = dict(next_offsets)
    for tp, cut in cuts.items():
        out[tp] = min(out.get(tp, cut), cut)
    return out


def group_by_status(plan: TxPlan) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for tx in plan.transactions.values():
        grouped[tx.status.value].append(tx.key)
    return dict(grouped)
