"""Transaction-consistent batches from Debezium's transaction metadata (``<topic.prefix>.transaction``).

A transaction is **complete** in a batch when its END event is in the batch and, for every data
collection the END lists, the batch holds exactly that many distinct data events (distinct by the
event's ``transaction.total_order``, so a redelivered event does not count twice). A batch applies
only complete transactions: every topic-partition is cut at the first record (data event, BEGIN or
END) of a transaction that is not complete, repeatedly until no complete transaction straddles a
cut, and nothing at or after a cut is applied or committed; the next batch starts at the cuts.

A transaction that stays incomplete longer than ``max_incomplete_age`` (measured from its first
record's Kafka timestamp to the batch's planning time, or, for one a batch's ``max_records`` cut may
leave short, to the point of the source's order the cut is at, whose later records may still complete
it (:func:`decide`); both kept in the ledger, so a redo decides the same way) is applied as it is and
reported as ``expired`` instead of stalling the source forever. An END whose count is
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

Where it is decided: :func:`facts` reads the change rows and BEGIN/END events through Arrow (two Spark jobs) and
groups them in the driver into one row per transaction (:func:`facts_of`, vectorised), deciding there which are
complete or empty by their own records; :func:`gather` makes the others :class:`TxInfo` for :func:`decide`, and
keeps the rest as Arrow columns (:class:`Settled`), which a cut can still reach. A small batch's rows are folded
one by one instead (:func:`fold`), every transaction a :class:`TxInfo`.

Transaction ids: PostgreSQL (and Informix) put ``<txId>:<LSN>`` in events, with a different LSN in
BEGIN, END and each change: they are grouped by the part before ``:``. MySQL/MariaDB ids (GTID or
``file=…,pos=…``) are used whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdclake.ingest.offsets import TopicPartition
from cdclake.lake.rows import local_time

SPLIT_ID_CONNECTORS = ("postgresql", "informix")
#: Connectors whose TRUNCATE is a transaction of its own without an END event (see the module docstring).
BINLOG_CONNECTORS = ("mysql", "mariadb")
#: a BEGIN/END id in the PostgreSQL/Informix style, ``<txId>:<LSN>`` (Java regex)
_SPLIT_ID = r"^\d+:\d+$"
#: Up to this many rows to gather (change rows with a transaction id, BEGIN/END events), :func:`gather` folds them
#: in Python one by one (:func:`fold`), every transaction a :class:`TxInfo`, instead of grouping them vectorised
#: (:func:`facts_of`) and keeping the settled ones as Arrow rows; both read the same two Spark jobs' rows.
FOLD_MAX_ROWS = 50_000
#: The most rows :func:`facts` reads through Arrow and groups at once. The driver's JVM holds a part's Arrow rows
#: (with the batch's cache) while it sends them, and the Python driver a part's rows and intermediates; a batch of
#: 3M events (5.15M rows) read at once ran a 2 GiB heap out of memory (docs/benchmarks.md).
FACTS_PART_ROWS = 1_000_000
#: Bytes of the driver's heap per row of a part (:func:`facts_part_rows`): parts of 1M rows ran the default 900m
#: heap (838.9M to the JVM) out of memory while the driver received their tasks' Arrow results, beside a 1M-record
#: batch's cache, in some of a follower's drains; parts of up to 500K rows did not (docs/reliability.md). With this,
#: that heap reads parts of up to 524K rows, and a heap of 1.6 GB (to the JVM) or more parts of 1M.
FACTS_ROW_HEAP_BYTES = 1_600
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
    # what precedes the first ":" (split's first part, without a regular expression and an array per row)
    return F.when(F.lower(connector).isin(*SPLIT_ID_CONNECTORS), F.substring_index(tx_id, ":", 1)).otherwise(tx_id)


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

    #: the transactions the decision looked at one by one (all of them but ``settled``'s)
    transactions: dict[str, TxInfo]
    cuts: dict[TopicPartition, int]
    enabled: bool
    #: those complete or empty by their own records and applied as such (:func:`gather`)
    settled: Settled | None = None

    def frontier(self) -> TxInfo | None:
        """The applied transaction with the greatest position (the consistent cut readers can use)."""
        applied = [t for t in self.transactions.values() if t.status in APPLIED and t.position]
        if self.settled is not None and (top := self.settled.frontier()) is not None:
            applied.append(top)
        return max(applied, key=lambda t: t.position or [], default=None)

    @property
    def held(self) -> list[TxInfo]:
        return [t for t in self.transactions.values() if t.status is TxStatus.HELD]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in TxStatus}
        for tx in self.transactions.values():
            out[tx.status.value] += 1
        if self.settled is not None:
            for status, n in self.settled.counts().items():
                out[status] += n
        return out


def _collected(table: pa.Table) -> list[dict[str, Any]]:
    """``table``'s rows as dicts, its timestamps as ``collect()`` gives them: naive, in the process's local time
    zone."""
    for i, f in enumerate(table.schema):
        if pa.types.is_timestamp(f.type) and f.type.tz is not None:
            table = table.set_column(i, f.name, pc.local_timestamp(table.column(i)))
    return table.to_pylist()


def _collection(name: Column) -> Column:
    """Spark twin of :func:`collection_name`."""
    return F.regexp_extract(name, _COLLECTION, 1)


#: the last one or two dot-separated parts of a data collection's name, for Spark (Java) and, its group named, for
#: Arrow (RE2), which read it alike
_COLLECTION = r"(?:^|\.)([^.]*(?:\.[^.]*)?)$"
_COLLECTION_NAMED = r"(?:^|\.)(?P<dc>[^.]*(?:\.[^.]*)?)$"
_COUNT = [pa.field("dc", pa.string()), pa.field("n", pa.int64())]
_OFFSET = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("first", pa.int64()),
    pa.field("last", pa.int64()),
]


def facts_part_rows(max_heap_bytes: int) -> int:
    """The most rows :func:`facts` reads at once in a driver whose heap holds at most ``max_heap_bytes``: one per
    :data:`FACTS_ROW_HEAP_BYTES`, between :data:`FOLD_MAX_ROWS` and :data:`FACTS_PART_ROWS` (pure)."""
    return min(FACTS_PART_ROWS, max(FOLD_MAX_ROWS, max_heap_bytes // FACTS_ROW_HEAP_BYTES))


def facts(
    data: Iterable[DataFrame],
    transactions: DataFrame | None,
    ignore_collections: Iterable[str] = (),
    rows: int | None = None,
    part_rows: int | None = None,
) -> pa.Table | None:
    """One row per transaction of the batch (:func:`facts_of`), from the change rows that carry a transaction id
    and the BEGIN/END events, each read through Arrow by one Spark job (a narrow projection of the cached rows;
    nothing is shuffled). A batch of more than ``part_rows`` ``rows`` (default :data:`FACTS_PART_ROWS`; a driver's
    own, :func:`facts_part_rows`) is read and grouped in as many parts, split by a hash of the transaction (each
    transaction's rows in one part).

    Args:
        data: decoded change rows of every table.
        transactions: decoded BEGIN/END events (None: the batch has none, known from its counts).
        ignore_collections: data collections whose events are not in ``data`` (the signaling table: its rows are
            skipped by the decoder but counted in END events); removed from the END counts.
        rows: how many rows both hold, when known (None: read at once).

    Returns:
        None when neither holds a transaction.
    """
    frames = list(data)
    events = _events(frames) if frames else None
    markers = _markers(transactions) if transactions is not None else None
    ignored = {collection_name(c) for c in ignore_collections}
    parts = max(1, -(-rows // (part_rows or FACTS_PART_ROWS))) if rows else 1

    def read(frame: DataFrame | None, part: int) -> pa.Table | None:
        if frame is None:
            return None
        if parts > 1:
            frame = frame.where(F.pmod(F.xxhash64("tx"), F.lit(parts)) == part)
        return frame.toArrow()

    grouped = [facts_of(read(events, part), read(markers, part), ignored) for part in range(parts)]
    tables = [t for t in grouped if t is not None]
    return pa.concat_tables(tables) if tables else None


def facts_of(events: pa.Table | None, markers: pa.Table | None, ignored: Collection[str] = ()) -> pa.Table | None:
    """One row per transaction of ``events`` (:func:`_events` rows) and ``markers`` (:func:`_markers` rows): the
    twin of :func:`fold`, vectorised over the Arrow columns (each transaction a number, rows grouped by sorting
    numbers with numpy, not row by row).

    Columns: ``tx``; ``observed`` (per data collection of its change rows, how many distinct non-null
    ``total_order`` values); its greatest ``position``; ``ops`` (null without change rows); ``connector``;
    ``offsets`` (the first and last per topic-partition); ``first_ts``, ``last_ts``; ``end_seen`` and the place of
    its END with the greatest offset (``end_topic``, ``end_partition``, ``end_offset``); that END's counts
    without the ``ignored`` collections (``expected``, ``expected_total``); and ``own``: what its own records say
    when that is final (``complete``, ``empty``; null: left to :func:`decide`, see :func:`_own_status`).

    Returns:
        None when neither holds a row.
    """
    events = events if events is not None and events.num_rows else None
    markers = markers if markers is not None and markers.num_rows else None
    if events is None and markers is None:
        return None
    # each transaction a number (its index in ``txs``), each row its transaction's; sorting numbers groups a
    # million rows faster, and in less memory, than Arrow's hash aggregation (docs/benchmarks.md)
    txs, group = _codes([t.column("tx") for t in (events, markers) if t is not None])
    n = len(txs)
    g_events = group[: events.num_rows] if events is not None else group[:0]
    g_markers = group[len(g_events) :]
    records = [(t, ts) for t, ts in ((events, "ts"), (markers, "kafka_ts")) if t is not None]

    # per topic-partition, the first and last offset of its records
    topics, topic = _codes([t["topic"] for t, _ in records])
    partition = np.concatenate([_ints(t["partition"]) for t, _ in records])
    pairs, pair = np.unique((topic << 32) | partition, return_inverse=True)  # each topic-partition a number
    pair = pair.reshape(-1)
    order, starts = _runs(group * len(pairs) + pair)
    offset = np.concatenate([_ints(t["offset"]) for t, _ in records])[order]
    span_pair = pairs[pair[order[starts]]]
    offsets = _lists(
        n,
        group[order[starts]],
        [
            topics.take(pa.array(span_pair >> 32)),
            pa.array((span_pair & 0xFFFFFFFF).astype(np.int32)),
            pa.array(np.minimum.reduceat(offset, starts)),
            pa.array(np.maximum.reduceat(offset, starts)),
        ],
        _OFFSET,
    )
    # the first and last timestamp: the same order sorts by transaction, each of which has a record
    ts_type = records[0][0][records[0][1]].type
    times = pa.chunked_array([c.cast(ts_type) for t, ts in records for c in t[ts].chunks], ts_type)
    by_tx = _run_starts(group[order])
    first_ts, last_ts = _span(times, order, by_tx)

    if events is not None:
        seen = _distinct_orders(g_events, events)
        ops = _op_sets(n, g_events, events["op"])
        names, code = _codes([events["connector"]])
        best = np.full(n, -1, dtype=np.int64)
        np.maximum.at(best, g_events, code)
        connector = names.take(pa.array(best, mask=best < 0))
        position = _greatest_per_group(n, g_events, events["position"].combine_chunks())
    else:
        seen = _no_counts()
        ops, connector = pa.nulls(n, pa.list_(pa.string())), pa.nulls(n, pa.string())
        position = pa.nulls(n, pa.list_(pa.decimal128(38, 0)))

    end_seen = np.zeros(n, dtype=bool)
    place = {
        "end_topic": pa.nulls(n, pa.string()),
        "end_partition": pa.nulls(n, pa.int32()),
        "end_offset": pa.nulls(n, pa.int64()),
    }
    wanted, expected_total = _no_counts(), pa.nulls(n, pa.int64())
    if markers is not None and (end := _last_end(g_markers, markers)) is not None:
        end_g, end_rows = end
        end_seen[end_g] = True
        for name, column in (("end_topic", "topic"), ("end_partition", "partition"), ("end_offset", "offset")):
            place[name] = _scatter(n, end_g, end_rows[column])
        wanted, total = _end_counts(end_g, end_rows, ignored)
        expected_total = _scatter(n, end_g, total)
    observed = _lists(n, seen["g"], [seen["dc"], seen["n"]], _COUNT)
    expected = _lists(n, wanted["g"], [wanted["dc"], wanted["n"]], _COUNT)
    return pa.table(
        {
            "tx": txs,
            "observed": observed,
            "position": position,
            "ops": ops,
            "connector": connector,
            "offsets": offsets,
            "first_ts": first_ts,
            "last_ts": last_ts,
            "end_seen": pa.array(end_seen),
            **place,
            "expected": expected,
            "expected_total": expected_total,
            "own": _own(n, seen, wanted, end_seen, expected_total),
        }
    )


def _ints(column: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """An integer column without nulls as a numpy ``int64`` array."""
    if isinstance(column, np.ndarray):
        return column.astype(np.int64, copy=False)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not chunks:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([c.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int64, copy=False)


def _codes(columns: Sequence[pa.ChunkedArray]) -> tuple[pa.Array, np.ndarray]:
    """The distinct values of ``columns`` (of one type), and each row's index among them (-1 for a null), the
    columns' rows one after another."""
    chunks = [c for col in columns for c in col.chunks]
    if not chunks:
        return pa.array([], columns[0].type), np.zeros(0, dtype=np.int64)
    encoded = pc.dictionary_encode(pa.concat_arrays(chunks))  # one dictionary (chunk by chunk, each its own)
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
    return encoded.dictionary, codes.astype(np.int64)


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (stable) order that sorts ``keys``, and where each run of equal keys starts in it."""
    order = np.argsort(keys, kind="stable")
    return order, _run_starts(keys[order])


def _span(times: pa.ChunkedArray, order: np.ndarray, starts: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """The least and greatest non-null of ``times`` in each run (``starts``) of ``order``; null for a run of nulls."""
    valid = np.asarray(times.is_valid())[order]
    values = np.asarray(pc.fill_null(times.cast(pa.int64()), 0))[order]
    top, bottom = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    least = np.minimum.reduceat(np.where(valid, values, top), starts)
    greatest = np.maximum.reduceat(np.where(valid, values, bottom), starts)
    return (
        pa.array(least, mask=least == top).cast(times.type),
        pa.array(greatest, mask=greatest == bottom).cast(times.type),
    )


def _distinct_orders(groups: np.ndarray, events: pa.Table) -> pa.Table:
    """Per transaction (``groups``) and data collection of ``events`` (``g``, ``dc``), how many distinct non-null
    ``total_order`` values (``n``)."""
    dcs, dc = _codes([events["dc"]])
    width = len(dcs) + 1
    key = groups * width + dc + 1  # a null collection is 0
    valid = np.asarray(events["total_order"].is_valid())
    orders = np.asarray(pc.fill_null(events["total_order"], 0)).astype(np.int64)
    order = np.lexsort((orders, valid, key))  # by key, nulls first, then by value
    key, valid, orders = key[order], valid[order], orders[order]
    new_key = np.r_[True, key[1:] != key[:-1]]
    new_value = valid & (new_key | ~np.r_[False, valid[:-1]] | np.r_[True, orders[1:] != orders[:-1]])
    starts = np.flatnonzero(new_key)
    counts = np.add.reduceat(new_value.astype(np.int64), starts)
    keys = key[starts]
    named = keys % width > 0  # as Spark's aggregation did, a null collection is not listed
    keys, counts = keys[named], counts[named]
    return pa.table({"g": pa.array(keys // width), "dc": dcs.take(pa.array(keys % width - 1)), "n": pa.array(counts)})


def _op_sets(n: int, groups: np.ndarray, ops: pa.ChunkedArray) -> pa.Array:
    """Per transaction, the distinct non-null ``ops`` of its rows (``groups``); null for one without rows."""
    names, code = _codes([ops])
    has = np.zeros((n, len(names)), dtype=bool)
    valid = code >= 0
    has[groups[valid], code[valid]] = True
    rows, columns = np.nonzero(has)
    bounds = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=bounds[1:])
    with_rows = np.zeros(n, dtype=bool)
    with_rows[groups] = True
    return pa.ListArray.from_arrays(
        pa.array(bounds), names.take(pa.array(columns)), type=pa.list_(pa.string()), mask=pa.array(~with_rows)
    )


def _no_counts() -> pa.Table:
    return pa.table({"g": pa.array([], pa.int64()), "dc": pa.array([], pa.string()), "n": pa.array([], pa.int64())})


def _scatter(n: int, groups: Any, values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``n`` values, the transaction ``groups[i]``'s being ``values[i]``; null for a transaction not in ``groups``."""
    at = np.full(n, -1, dtype=np.int64)
    keys = _ints(groups)
    at[keys] = np.arange(len(keys))
    taken = pc.take(values, pa.array(at, mask=at < 0))
    return taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken


def _lists(n: int, groups: Any, columns: Sequence[pa.Array | pa.ChunkedArray], fields: list[pa.Field]) -> pa.Array:
    """``n`` lists of structs (``fields``, from ``columns``), the transaction ``groups[i]``'s holding row ``i``; an
    empty list for a transaction not in ``groups``."""
    keys = _ints(groups)
    order = pa.array(np.argsort(keys, kind="stable"))
    values = [pc.take(c, order) for c in columns]
    values = [v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v for v in values]
    struct = pa.StructArray.from_arrays(values, fields=fields)
    bounds = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(keys, minlength=n), out=bounds[1:])
    return pa.ListArray.from_arrays(pa.array(bounds), struct)


def _greatest_per_group(n: int, groups: np.ndarray, positions: pa.ListArray) -> pa.Array:
    """Per transaction, the greatest of its rows' ``positions`` (:func:`_greatest_rows`); null when it has none."""
    best = _greatest_rows(groups, positions)
    if not len(best):
        return pa.nulls(n, positions.type)
    return _scatter(n, groups[best], positions.take(pa.array(best)))


def _greatest_rows(groups: np.ndarray, positions: pa.ListArray) -> np.ndarray:
    """Per group of ``groups``, the row of its greatest non-null ``positions`` (lists compared as Python compares
    them: element by element, a prefix first; the first read of equal ones), by one Arrow sort."""
    valid = np.asarray(positions.is_valid())
    rows = np.flatnonzero(valid)
    if not len(rows):
        return rows
    lengths = pc.fill_null(pc.list_value_length(positions), 0).to_numpy().astype(np.int64)
    starts = positions.offsets.to_numpy()[:-1].astype(np.int64)
    keys: dict[str, Any] = {"g": groups}
    for i in range(int(lengths.max())):
        keys[f"p{i}"] = pc.take(positions.values, pa.array(starts + i, mask=lengths <= i))
    ranked = pa.table(keys).take(pa.array(rows))
    order = pc.sort_indices(
        ranked, [("g", "ascending", "at_end"), *((k, "descending", "at_end") for k in keys if k != "g")]
    ).to_numpy()
    return rows[order[_run_starts(groups[rows][order])]]


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in the sorted ``ordered``."""
    return np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])


def _last_end(groups: np.ndarray, markers: pa.Table) -> tuple[np.ndarray, pa.Table] | None:
    """Each transaction's END with the greatest offset (the first read of equal ones): their transactions, and
    their rows of ``markers``; None without an END."""
    is_end = np.asarray(pc.fill_null(pc.equal(markers["status"], "END"), False))
    if not is_end.any():
        return None
    rows = np.flatnonzero(is_end)
    ends = pa.table({"g": groups[rows], "offset": markers["offset"].take(pa.array(rows))})
    order = pc.sort_indices(ends, [("g", "ascending"), ("offset", "descending")]).to_numpy()
    picked = rows[order[_run_starts(groups[rows][order])]]
    return groups[picked], markers.take(pa.array(picked))


def _end_counts(end_g: np.ndarray, ends: pa.Table, ignored: Collection[str]) -> tuple[pa.Table, pa.Array]:
    """The counts of the ENDs ``ends`` (of the transactions ``end_g``) without the ``ignored`` collections: one row
    per listed collection (``g``, ``dc``, ``n``), and each END's total less the ignored collections' counts."""
    listed = ends["data_collections"].combine_chunks()
    entries = pc.list_flatten(listed)
    owner = pc.list_parent_indices(listed).to_numpy().astype(np.int64)
    names = entries.field("data_collection")
    dcs = pc.struct_field(pc.extract_regex(names, _COLLECTION_NAMED), [0])
    skip = np.asarray(pc.fill_null(pc.is_in(dcs, pa.array(sorted(ignored), pa.string())), False))
    counts = entries.field("event_count")
    skipped = np.zeros(len(end_g), dtype=np.int64)
    np.add.at(skipped, owner[skip], pc.fill_null(counts, 0).to_numpy()[skip].astype(np.int64))
    kept = np.flatnonzero(~skip)
    wanted = pa.table(
        {"g": end_g[owner[kept]], "dc": dcs.take(pa.array(kept)), "n": counts.take(pa.array(kept)).cast(pa.int64())}
    )
    return wanted, pc.subtract(ends["event_count"].cast(pa.int64()), pa.array(skipped))


def _own(n: int, seen: pa.Table, wanted: pa.Table, end_seen: np.ndarray, expected_total: pa.Array) -> pa.Array:
    """Per transaction, ``empty`` when it has neither change rows nor END counts (``seen``, ``wanted``: ``g``,
    ``dc``, ``n`` rows), ``complete`` when its END was seen and its distinct events per data collection equal
    the END's counts (and their sum its total), else null (the first two cases of :func:`_own_status`)."""
    seen_g, wanted_g = _ints(seen["g"]), _ints(wanted["g"])
    short = np.zeros(n, dtype=bool)
    # a collection of its change rows that its END does not list
    short[_ints(seen.join(wanted.select(["g", "dc"]), keys=["g", "dc"], join_type="left anti")["g"])] = True
    # a count of its END that the distinct events of that collection do not meet
    met = wanted.join(seen.rename_columns(["g", "dc", "seen"]), keys=["g", "dc"], join_type="left outer")
    unmet = pc.fill_null(pc.not_equal(pc.fill_null(met["seen"], 0), met["n"]), True)
    short[_ints(pc.filter(met["g"], unmet))] = True
    total = np.zeros(n, dtype=np.int64)
    np.add.at(total, seen_g, _ints(seen["n"]))
    wants = np.asarray(pc.fill_null(expected_total, 0))
    total_met = np.asarray(expected_total.is_null()) | (total == wants)
    complete = end_seen & ~short & total_met
    empty = (np.bincount(seen_g, minlength=n) == 0) & (np.bincount(wanted_g, minlength=n) == 0)
    own = np.where(empty, TxStatus.EMPTY.value, np.where(complete, TxStatus.COMPLETE.value, None))
    return pa.array(own, pa.string())


def _events(data: Sequence[DataFrame]) -> DataFrame:
    """The change rows of every table that carry a transaction id: their transaction (``tx``), ``total_order``,
    data collection (``dc``), ``topic``, ``partition``, ``offset``, Kafka timestamp (``ts``), ``position``,
    ``op`` and ``connector``."""
    frames = [
        d.where(F.col("_cdc_tx_id").isNotNull()).select(
            tx_key(F.col("_cdc_connector"), F.col("_cdc_tx_id")).alias("tx"),
            F.col("_cdc_tx_total_order").alias("total_order"),
            _collection(
                F.concat_ws(".", F.coalesce(F.col("_cdc_schema"), F.col("_cdc_db")), F.col("_cdc_table"))
            ).alias("dc"),
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
    return reduce(DataFrame.unionByName, frames)


def _markers(transactions: DataFrame) -> DataFrame:
    """The BEGIN/END events with their transaction (``tx``), ``topic``, ``partition``, ``offset``, ``kafka_ts``,
    ``status``, ``event_count`` and ``data_collections``."""
    # BEGIN/END carry no connector: "<digits>:<digits>" is the PostgreSQL/Informix style
    # (a MySQL GTID "<uuid>:<n>" is used whole, like in its data events)
    return transactions.select(
        F.when(F.col("id").rlike(_SPLIT_ID), F.substring_index("id", ":", 1)).otherwise(F.col("id")).alias("tx"),
        "topic",
        "partition",
        "offset",
        "kafka_ts",
        "status",
        "event_count",
        "data_collections",
    )


def info_of(row: Mapping[str, Any]) -> TxInfo:
    """The :class:`TxInfo` of a row of :func:`facts` (as :func:`_collected` gives it)."""
    tx = TxInfo(
        key=row["tx"],
        end_seen=bool(row["end_seen"]),
        expected_total=None if row["expected_total"] is None else int(row["expected_total"]),
        expected={e["dc"]: int(e["n"]) for e in row["expected"]},
        observed={o["dc"]: int(o["n"]) for o in row["observed"]},
        first_ts=row["first_ts"],
        last_ts=row["last_ts"],
        position=None if row["position"] is None else [int(x) for x in row["position"]],
        ops=set(row["ops"] or ()),
        connector=row["connector"],
    )
    if row["end_seen"]:
        tx.end_at = ((row["end_topic"], int(row["end_partition"])), int(row["end_offset"]))
    for o in row["offsets"]:
        tx.add_offset((o["topic"], int(o["partition"])), int(o["first"]), int(o["last"]))
    return tx


@dataclass
class Settled:
    """The transactions of a batch that their own records decide (complete or empty), as the Arrow rows of
    :func:`facts`: a large batch's hundreds of thousands of them never become Python objects. Those that reach
    a partition's cut (after a held transaction) move to :func:`decide`'s transactions (:meth:`straddling`)."""

    rows: pa.Table
    moved: set[int] = field(default_factory=set)

    def _kept(self) -> pa.Table:
        if not self.moved:
            return self.rows
        keep = np.ones(self.rows.num_rows, dtype=bool)
        keep[list(self.moved)] = False
        return self.rows.filter(pa.array(keep))

    def latest_ts(self) -> datetime | None:
        """The latest timestamp of their records (naive local time, as :class:`TxInfo` holds it)."""
        return local_time(pc.max(self.rows.column("last_ts")).as_py())

    def straddling(self, cuts: Mapping[TopicPartition, int]) -> list[TxInfo]:
        """Those not moved yet with a record at or after a cut of their partition; they move."""
        offsets = self.rows.column("offsets").combine_chunks()
        flat = pc.list_flatten(offsets)
        owner = pc.list_parent_indices(offsets)
        reach = pa.array(np.zeros(len(flat), dtype=bool))
        for (topic, partition), cut in cuts.items():
            here = pc.and_(
                pc.and_(pc.equal(flat.field("topic"), topic), pc.equal(flat.field("partition"), partition)),
                pc.greater_equal(flat.field("last"), cut),
            )
            reach = pc.or_(reach, here)
        found = sorted(set(pc.filter(owner, reach).to_pylist()) - self.moved)
        self.moved.update(found)
        moved = []
        for row in _collected(self.rows.take(found)) if found else ():
            tx = info_of(row)
            tx.status = TxStatus(row["own"])
            moved.append(tx)
        return moved

    def counts(self) -> dict[str, int]:
        return {v["values"]: v["counts"] for v in pc.value_counts(self._kept().column("own")).to_pylist()}

    def frontier(self) -> TxInfo | None:
        """The complete one with the greatest position (only the positions are copied to find it)."""
        kept = self._kept()
        positions = kept.column("position")
        with_position = pc.indices_nonzero(pc.is_valid(positions))
        if not len(with_position):
            return None
        greatest = _greatest(pc.take(positions, with_position).combine_chunks())
        return info_of(_collected(kept.slice(with_position[greatest].as_py(), 1))[0])

    def audit_rows(self, source: str, batch_id: str) -> pa.Table:
        """Rows for ``cdc_audit.transactions`` (see :func:`audit_rows`) of the complete ones."""
        kept = self._kept().select(["tx", "expected", "own"])
        rows = kept.filter(pc.equal(kept.column("own"), TxStatus.COMPLETE.value))
        expected = rows.column("expected").combine_chunks()
        flat = pc.list_flatten(expected)
        owner = pc.list_parent_indices(expected)
        n = flat.field("n")
        size = len(flat)
        return pa.table(
            {
                "source": pa.array([source] * size, pa.string()),
                "batch_id": pa.array([batch_id] * size, pa.string()),
                "tx_id": pc.take(rows.column("tx"), owner),
                "data_collection": flat.field("dc"),
                "expected": n,
                "applied": n,
                "seen": n,
                "status": pa.array([TxStatus.COMPLETE.value] * size, pa.string()),
                "end_seen": pa.array(np.ones(size, dtype=bool)),
            }
        )


def _greatest(positions: pa.ListArray) -> int:
    """The index of the greatest of ``positions`` (all non-null; lists compared as Python compares them)."""
    return int(_greatest_rows(np.zeros(len(positions), dtype=np.int64), positions)[0])


def fold(
    data: Iterable[DataFrame], transactions: DataFrame | None, ignore_collections: Iterable[str] = ()
) -> dict[str, TxInfo]:
    """Every transaction of the batch as :class:`TxInfo`, folded in Python from its rows (the Python twin of
    :func:`facts` and :func:`info_of`; arguments as theirs): the change rows that carry a transaction id and the
    BEGIN/END events are collected, one Spark job each, and nothing is shuffled. For a small batch (see
    :func:`gather`)."""
    ignored = {collection_name(c) for c in ignore_collections}
    infos: dict[str, TxInfo] = {}
    frames = list(data)
    if frames:
        orders: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        for row in _collected(_events(frames).toArrow()):
            tx = infos.setdefault(row["tx"], TxInfo(key=row["tx"]))
            seen = orders[tx.key][row["dc"]]
            if row["total_order"] is not None:  # a distinct count, as count_distinct: nulls are not counted
                seen.add(row["total_order"])
            tx.add_offset((row["topic"], int(row["partition"])), int(row["offset"]))
            tx.add_ts(row["ts"])
            if row["position"] is not None:
                position = [int(x) for x in row["position"]]
                tx.position = position if tx.position is None else max(tx.position, position)
            if row["op"] is not None:
                tx.ops.add(row["op"])
            if tx.connector is None:
                tx.connector = row["connector"]
        for key, per_collection in orders.items():
            infos[key].observed = {dc: len(seen) for dc, seen in per_collection.items()}
    if transactions is not None:
        for row in _collected(_markers(transactions).toArrow()):
            tx = infos.setdefault(row["tx"], TxInfo(key=row["tx"]))
            tp, offset = (row["topic"], int(row["partition"])), int(row["offset"])
            tx.add_offset(tp, offset)
            tx.add_ts(row["kafka_ts"])
            if row["status"] != "END" or (tx.end_at is not None and tx.end_at[1] >= offset):
                continue
            # the END with the greatest offset, its counts without the ignored collections
            listed = [(collection_name(d["data_collection"]), d["event_count"]) for d in row["data_collections"] or ()]
            tx.end_seen, tx.end_at = True, (tp, offset)
            tx.expected = {dc: int(n) for dc, n in listed if dc not in ignored}
            total = row["event_count"]
            tx.expected_total = None if total is None else total - sum(n or 0 for dc, n in listed if dc in ignored)
    return infos


def gather(
    data: Iterable[DataFrame],
    transactions: DataFrame | None,
    ignore_collections: Iterable[str] = (),
    *,
    settle: bool = True,
    rows: int | None = None,
    part_rows: Callable[[], int] | None = None,
) -> tuple[dict[str, TxInfo], Settled | None]:
    """Collect the batch's per-transaction facts (:func:`facts`: two Spark jobs read through Arrow, in parts of at
    most ``part_rows()`` rows, asked only then and only when ``rows`` is known: a driver's heap sizes them,
    :func:`facts_part_rows`); for a batch of up to :data:`FOLD_MAX_ROWS` ``rows`` (its change rows with a
    transaction id and its BEGIN/END events, when known), fold them in Python instead (:func:`fold`).

    Returns:
        the transactions left to :func:`decide`, as :class:`TxInfo`; and, with ``settle`` on a batch not
        folded, the rest (:class:`Settled`), else None and every transaction in the first.
    """
    if rows is not None and rows <= FOLD_MAX_ROWS:
        return fold(data, transactions, ignore_collections), None
    table = facts(data, transactions, ignore_collections, rows, part_rows() if rows and part_rows else None)
    if table is None:
        return {}, None
    if not settle:
        return {t.key: t for t in map(info_of, _collected(table))}, None
    own = table.column("own")
    if not own.null_count:  # every transaction settled: no copy of the table (a large batch's may take 100 MiB)
        return {}, Settled(table)
    pending = _collected(table.filter(pc.is_null(own)))
    return {t.key: t for t in map(info_of, pending)}, Settled(table.filter(pc.is_valid(own)))


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
    settled: Settled | None = None,
    capped_at: datetime | None = None,
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
        lost: the records lost in the gaps the run accepted (their check needs every transaction: with
            some, ``infos`` holds all of them, :func:`gather` with ``settle=False``).
        settled: the transactions of the batch not in ``infos``, complete or empty by their own records
            (from :func:`gather`); those after a cut are held, and move to the plan's ``transactions``.
        capped_at: for a batch ``max_records`` cut, the Kafka timestamp up to which it read every partition the
            cap cut (:mod:`cdclake.ingest.batch.plan`). A transaction whose records may go on past it (its END
            not in the batch, or at or after it) is aged up to it instead of ``now``: the records after the cut
            may complete it. One whose END is before it has every event before it too (Debezium writes a
            transaction's events before its END), so the batch holds all it will ever have: aged up to ``now``.
    """
    infos = dict(infos)
    if _RECORD_CLOCK.get() if on_record_clock is None else on_record_clock:
        stamps = [t.last_ts for t in infos.values() if t.last_ts is not None]
        if settled is not None and (last := settled.latest_ts()) is not None:
            stamps.append(last)
        latest = max(stamps, default=None)
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
        elif tx.first_ts is not None and _aged_to(tx, now, capped_at) - tx.first_ts > max_incomplete_age:
            tx.status = TxStatus.MISMATCHED if tx.end_seen else TxStatus.EXPIRED
    cuts: dict[TopicPartition, int] = {}
    if not enabled:
        return TxPlan(infos, cuts, enabled, settled)
    changed = True
    while changed:
        changed = False
        for tx in infos.values():
            if tx.status is TxStatus.HELD:
                for tp, first in tx.first_offsets.items():
                    if first < cuts.get(tp, ranges_end.get(tp, first + 1)):
                        cuts[tp] = first
                        changed = True
        if changed and settled is not None:
            for tx in settled.straddling(cuts):
                infos[tx.key] = tx
        for tx in infos.values():
            if tx.status in APPLIED and any(tp in cuts and last >= cuts[tp] for tp, last in tx.last_offsets.items()):
                tx.status = TxStatus.HELD
                changed = True
    return TxPlan(infos, cuts, enabled, settled)


def _aged_to(tx: TxInfo, now: datetime, capped_at: datetime | None) -> datetime:
    """What ``tx``'s age is measured up to (see ``capped_at`` of :func:`decide`)."""
    if capped_at is None or capped_at >= now:
        return now
    if tx.end_seen and tx.last_ts is not None and tx.last_ts < capped_at:
        return now
    return capped_at


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
    """Rows for ``cdc_audit.transactions``: one per transaction and data collection (of ``plan.transactions``;
    its ``settled`` give theirs as Arrow, :meth:`Settled.audit_rows`)."""
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
