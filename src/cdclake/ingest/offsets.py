"""Planning a batch: which offset range of each topic-partition to read (pure functions).

A batch continues every topic-partition at the offset the ledger recorded for it. When the log no longer
holds that offset (:class:`OffsetGap`: records deleted before they were ingested, or a topic re-created or
truncated), planning stops with :class:`~cdclake.exceptions.OffsetGapError` unless the run accepts the loss
for that topic-partition (:class:`GapAcceptance`, ``--accept-gap``); an accepted gap starts at the log start
and is reported (:class:`AcceptedGap`).

A batch capped by ``max_records`` is cut at one point of the source's order where the records can say where that
is: at a Kafka timestamp, every partition up to its first record at or after it (:func:`cap_at_time`), so that
the transaction topic and the data topics end together and a transaction the cap cuts is cut in all of them. The
batch's ``capped_at`` is that timestamp: the ages of the transactions the cut may leave short are measured up to
it (:func:`cdclake.ingest.transactions.decide`).
"""

from __future__ import annotations

import getpass
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cdclake.exceptions import ConfigError, OffsetGapError

if TYPE_CHECKING:
    from pyspark.sql import Column

#: (topic, partition)
TopicPartition = tuple[str, int]

#: Given a Kafka timestamp (ms since the epoch), each asked topic-partition's first offset whose record's timestamp
#: is at or after it, or None when no record is (Kafka's ``ListOffsets`` by timestamp).
OffsetsAt = Callable[[int], Mapping[TopicPartition, int | None]]

#: A Kafka topic name (its legal characters).
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)

    def holds(self, topic: str, partition: int, offset: int) -> bool:
        """True when the record at these coordinates is one of this range's."""
        return topic == self.topic and partition == self.partition and self.start <= offset < self.end


def within(
    ranges: Sequence[OffsetRange], topic: str = "topic", partition: str = "partition", offset: str = "offset"
) -> Column:
    """True for records inside ``ranges`` (a Spark column over the named coordinate columns)."""
    from pyspark.sql import functions as F

    inside = F.lit(False)
    for r in ranges:
        inside = inside | (
            (F.col(topic) == r.topic) & (F.col(partition) == r.partition) & F.col(offset).between(r.start, r.end - 1)
        )
    return inside


class GapKind(StrEnum):
    """Why a topic-partition's log no longer holds the offset the source continues from."""

    #: the log starts after it: records were deleted before they were ingested (retention, ``kafka-delete-records``)
    DELETED = "deleted"
    #: the log ends before it: the topic was deleted and re-created, or its log truncated
    TRUNCATED = "truncated"


@dataclass(frozen=True, order=True)
class OffsetGap:
    """A topic-partition whose log no longer holds the offset the source continues from.

    Attributes:
        topic: the topic.
        partition: the partition.
        kind: deleted records, or a re-created or truncated log (:class:`GapKind`).
        committed: the offset the source continues from (the last committed batch's ``next_offsets``; for the
            redo of an interrupted batch, where its planned range starts).
        log_start: the log's first offset: where a batch that accepts the gap starts.
        log_end: the log's end offset (None when not known: the redo of a batch that accepted the gap).
    """

    topic: str
    partition: int
    kind: GapKind
    committed: int
    log_start: int
    log_end: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def acceptance(self) -> str:
        """The ``--accept-gap`` value that accepts this gap."""
        return f"{self.topic}:{self.partition}"

    def describe(self) -> str:
        """One line naming the topic-partition and the missing offsets, e.g. ``my.app.t[0]: offsets 120..449 were
        deleted before they were ingested (log starts at 450)``."""
        where = f"{self.topic}[{self.partition}]"
        if self.kind is GapKind.DELETED:
            return (
                f"{where}: offsets {self.committed}..{self.log_start - 1} were deleted before they were ingested "
                f"(log starts at {self.log_start})"
            )
        if self.log_end is None:
            return (
                f"{where}: the log was re-created or truncated below offset {self.committed}, where the source "
                f"continued; the batch starts at {self.log_start}"
            )
        now = (
            f"it now holds offsets {self.log_start}..{self.log_end - 1}"
            if self.log_end > self.log_start
            else f"it is now empty, from offset {self.log_start}"
        )
        return (
            f"{where}: the log ends at {self.log_end}, before offset {self.committed} where the source continues: "
            f"the topic was re-created or its log truncated, and whatever it held from offset {self.committed} on "
            f"is gone ({now})"
        )


@dataclass(frozen=True)
class GapAcceptance:
    """The gaps one run accepts (``--accept-gap``): every partition of some topics, and single topic-partitions.

    Attributes:
        topics: topics whose every partition may start at its log start.
        partitions: single topic-partitions that may.
        accepted_by: who accepted the loss (recorded with each gap accepted).
    """

    topics: frozenset[str] = frozenset()
    partitions: frozenset[TopicPartition] = frozenset()
    accepted_by: str | None = None

    @classmethod
    def parse(cls, values: Iterable[str], accepted_by: str | None = None) -> GapAcceptance:
        """The acceptance of ``--accept-gap`` values: ``TOPIC:PARTITION`` or ``TOPIC`` (every partition), each
        value possibly several of them separated by commas (a topic name has none); blank ones accept nothing
        (what a template renders for an empty list).

        ``accepted_by`` defaults to the user running the process when any gap is accepted.

        Raises:
            ConfigError: when a value is neither (names the value).
        """
        topics: set[str] = set()
        partitions: set[TopicPartition] = set()
        for value in (v.strip() for given in values for v in given.split(",")):
            if not value:
                continue
            topic, sep, partition = value.rpartition(":")
            if not sep:
                topic, partition = partition, ""
            if not _TOPIC_NAME.fullmatch(topic) or (sep and not partition.isdigit()):
                raise ConfigError(
                    f"--accept-gap {value!r}: expected TOPIC:PARTITION (e.g. my.app.t:0) or TOPIC (every partition "
                    "of the topic); a topic name has only letters, digits, '.', '_' and '-'"
                )
            if sep:
                partitions.add((topic, int(partition)))
            else:
                topics.add(topic)
        if not (topics or partitions):
            return cls()
        return cls(frozenset(topics), frozenset(partitions), accepted_by or _current_user())

    def __bool__(self) -> bool:
        return bool(self.topics or self.partitions)

    def covers(self, topic: str, partition: int) -> bool:
        """Whether this run accepts a gap of ``topic``'s ``partition``."""
        return topic in self.topics or (topic, partition) in self.partitions


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a container's anonymous uid)
        return "unknown"


@dataclass(frozen=True)
class AcceptedGap:
    """A gap a batch accepted: what was lost, who accepted it and when (the summary's ``accepted_gaps``)."""

    gap: OffsetGap
    accepted_by: str | None
    accepted_at: datetime

    def as_dict(self) -> dict[str, Any]:
        """``{"topic", "partition", "kind", "committed", "resumed_at", "log_end", "accepted_by", "accepted_at",
        "detail"}``: ``kind`` ``deleted`` lost offsets ``committed..resumed_at - 1``; ``truncated`` lost what the
        old log held from ``committed`` on, and read the new log from ``resumed_at``."""
        g = self.gap
        return {
            "topic": g.topic,
            "partition": g.partition,
            "kind": str(g.kind),
            "committed": g.committed,
            "resumed_at": g.log_start,
            "log_end": g.log_end,
            "accepted_by": self.accepted_by,
            "accepted_at": self.accepted_at.isoformat(),
            "detail": g.describe(),
        }


@dataclass(frozen=True)
class RangePlan:
    """The ranges a batch reads, and the gaps the run accepted to plan them.

    Attributes:
        ranges: non-empty ranges, sorted by topic and partition.
        gaps: the accepted gaps, sorted (each starts at its log start).
        capped: the partitions the cap ended before their log end.
        capped_at: when the cap cut every partition at one Kafka timestamp (:func:`cap_at_time`), that timestamp
            (UTC): every record of the capped partitions before it is in the batch, none at or after it.
    """

    ranges: list[OffsetRange]
    gaps: list[OffsetGap] = field(default_factory=list)
    capped: list[TopicPartition] = field(default_factory=list)
    capped_at: datetime | None = None

    def next_offsets(self, committed: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Where the source continues after the batch: each range's end, else an accepted gap's log start (also
        when the log holds nothing more), else ``committed``."""
        return {**committed, **{g.topic_partition: g.log_start for g in self.gaps}, **end_offsets(self.ranges)}


def find_gaps(
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> list[OffsetGap]:
    """The topic-partitions whose log no longer holds their committed offset (sorted).

    A committed offset before the log start is a :attr:`GapKind.DELETED` gap (the offsets from it to the log
    start are gone), one after the log end a :attr:`GapKind.TRUNCATED` one. A topic-partition without
    watermarks (its topic deleted and not re-created) has no records to read and is no gap.
    """
    gaps = []
    for (topic, partition), offset in committed.items():
        if (topic, partition) not in latest:
            continue
        start, end = earliest.get((topic, partition), 0), latest[(topic, partition)]
        if offset < start:
            gaps.append(OffsetGap(topic, partition, GapKind.DELETED, offset, start, end))
        elif offset > end:
            gaps.append(OffsetGap(topic, partition, GapKind.TRUNCATED, offset, start, end))
    return sorted(gaps)


def check_gaps(gaps: Sequence[OffsetGap], accept: GapAcceptance | None, source: str | None = None) -> list[OffsetGap]:
    """``gaps``, when ``accept`` covers every one of them.

    Raises:
        OffsetGapError: naming every gap ``accept`` does not cover, with the ``--accept-gap`` values that would.
    """
    refused = [g for g in gaps if accept is None or not accept.covers(g.topic, g.partition)]
    if refused:
        raise OffsetGapError(_gap_message(refused, source), gaps=refused)
    return list(gaps)


def _gap_message(gaps: Sequence[OffsetGap], source: str | None) -> str:
    flags = " ".join(f"--accept-gap {g.acceptance}" for g in gaps)
    return "\n".join(
        [
            f"{f'source {source}: ' if source else ''}{len(gaps)} topic-partition(s) cannot continue where the "
            "ledger left them: Kafka no longer holds those offsets; nothing was read:",
            *(f"  {g.describe()}" for g in gaps),
            "If these records cannot be brought back, accept the loss for this run with "
            f"`{flags}` (cdclake ingest, jobs/ingest.py; `--accept-gap TOPIC` accepts every partition of a "
            "topic): the batch then starts at the log start, logs a warning and records each gap in its summary "
            "(accepted_gaps). Re-snapshot the affected tables afterwards to bring the lost changes back.",
        ]
    )


def plan_ranges(
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_records: int | None = None,
    *,
    accept: GapAcceptance | None = None,
    log_bounds: bool = True,
    source: str | None = None,
    offsets_at: OffsetsAt | None = None,
) -> RangePlan:
    """Ranges from the committed offsets (or the earliest available) to the latest, capped.

    Args:
        committed: next offset to read per partition, from the last committed batch.
        earliest: first available offset per partition (log start).
        latest: end offset per partition (high watermark).
        max_records: cap on the records of the whole batch. With ``offsets_at``, every partition is cut at one
            Kafka timestamp (:func:`cap_at_time`); without it, or when the earliest such cut holds more than the
            cap, the cap is shared out so that every partition with a backlog advances (at least one record
            each, then in proportion).
        accept: the gaps this run accepts (:func:`find_gaps`): those partitions start at their log start.
        log_bounds: whether ``earliest`` and ``latest`` are the log's own bounds (Kafka). False for records
            read from files, whose first and last offsets say nothing of the log: a committed offset before
            them starts at the first record, and none is a gap.
        source: the source's name, for the error.
        offsets_at: the log's offsets by timestamp (:data:`OffsetsAt`), where the source can look them up.

    Returns:
        Non-empty ranges, sorted by topic and partition, and the accepted gaps. A partition never read
        starts at its earliest offset.

    Raises:
        OffsetGapError: when a committed offset is outside its log (:func:`find_gaps`) and ``accept`` does not
            cover that topic-partition.
    """
    gaps = check_gaps(find_gaps(committed, earliest, latest), accept, source) if log_bounds else []
    starts = {**committed, **{g.topic_partition: g.log_start for g in gaps}}
    wanted: dict[TopicPartition, tuple[int, int]] = {}
    for tp, end in latest.items():
        start = max(starts.get(tp, earliest.get(tp, 0)), earliest.get(tp, 0))
        if end > start:
            wanted[tp] = (start, end)
    capped_at = None
    if max_records is not None and sum(e - s for s, e in wanted.values()) > max_records:
        cut = cap_at_time(wanted, max_records, offsets_at) if offsets_at is not None else None
        if cut is not None:
            wanted, capped_at = cut
        else:
            wanted = _cap(wanted, max(max_records, len(wanted)))
    ranges = sorted(OffsetRange(t, p, s, e) for (t, p), (s, e) in wanted.items() if e > s)
    capped = sorted(tp for tp, (_, e) in wanted.items() if e < latest[tp])
    return RangePlan(ranges, gaps, capped, capped_at)


def cap_at_time(
    wanted: Mapping[TopicPartition, tuple[int, int]], budget: int, offsets_at: OffsetsAt
) -> tuple[dict[TopicPartition, tuple[int, int]], datetime] | None:
    """``wanted`` cut at the latest Kafka timestamp where the records before it, over all partitions, are at most
    ``budget`` (and at least one): each partition ends at its first record at or after that timestamp.

    Debezium's connector task produces a capture's records (data events, BEGIN and END) in the source's order, so
    their timestamps place every partition's cut at the same point of it: the transaction topic is not read past
    the data topics' ends (nor they past its), and a transaction the cap cuts is cut in every partition. A binary
    search over the timestamps (about 40 lookups of ``offsets_at``).

    Returns:
        The cut ranges (a partition may end at its start) and the timestamp (UTC); None when even the records of
        the earliest millisecond are more than ``budget`` (or ``offsets_at`` finds no record before the ends).
    """
    tps = list(wanted)

    def cut(at_ms: int) -> dict[TopicPartition, tuple[int, int]]:
        found = offsets_at(at_ms)
        out = {}
        for tp in tps:
            start, end = wanted[tp]
            offset = found.get(tp)
            out[tp] = (start, end if offset is None or offset < 0 else min(end, max(start, offset)))
        return out

    def count(ranges: Mapping[TopicPartition, tuple[int, int]]) -> int:
        return sum(e - s for s, e in ranges.values())

    # count(cut(t)) grows with t: 0 at the epoch (every record is at or after it), everything past the present
    lo, hi = 0, int(datetime.now(UTC).timestamp() * 1000) + 1
    if count(cut(hi)) <= budget:  # records timestamped in the future: read to the end
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(cut(mid)) <= budget:
            lo = mid
        else:
            hi = mid
    best = cut(lo)
    if count(best) == 0:
        return None
    return best, datetime.fromtimestamp(lo / 1000, tz=UTC)


def redo_ranges(
    ranges: Sequence[OffsetRange],
    next_offsets: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    accept: GapAcceptance | None = None,
    source: str | None = None,
) -> RangePlan:
    """The planned ranges of an interrupted batch, checked against the log before they are read again.

    A range that starts before the log start (records deleted since it was planned) or ends after the log end
    (the topic re-created or its log truncated) cannot be redone as planned. When ``accept`` covers it, a
    deleted range is read from the log start (and left out when nothing of it is left), a truncated one is left
    out; the next batch continues at the log start (:meth:`RangePlan.next_offsets` of ``next_offsets``).

    Raises:
        OffsetGapError: for such a range ``accept`` does not cover.
    """
    gaps = []
    for r in ranges:
        tp = (r.topic, r.partition)
        if tp not in latest:
            continue
        start, end = earliest.get(tp, 0), latest[tp]
        if r.start < start:
            gaps.append(OffsetGap(r.topic, r.partition, GapKind.DELETED, r.start, start, end))
        elif r.end > end:
            gaps.append(OffsetGap(r.topic, r.partition, GapKind.TRUNCATED, r.start, start, end))
    accepted = check_gaps(sorted(gaps), accept, source)
    lost = {g.topic_partition: g for g in accepted}
    kept = []
    for r in ranges:
        gap = lost.get((r.topic, r.partition))
        if gap is None:
            kept.append(r)
        elif gap.kind is GapKind.DELETED and r.end > gap.log_start:
            kept.append(OffsetRange(r.topic, r.partition, gap.log_start, r.end))
    return RangePlan(sorted(kept), accepted)


def planned_gaps(
    committed: Mapping[TopicPartition, int], ranges: Sequence[OffsetRange], next_offsets: Mapping[TopicPartition, int]
) -> list[OffsetGap]:
    """The gaps an interrupted batch accepted when it was planned, read from its ledger rows: every
    topic-partition it starts elsewhere than at the last committed batch's ``next_offsets`` (sorted; the log's
    end is not known then)."""
    starts = {**next_offsets, **{(r.topic, r.partition): r.start for r in ranges}}
    gaps = []
    for (topic, partition), offset in committed.items():
        start = starts.get((topic, partition))
        if start is None or start == offset:
            continue
        kind = GapKind.DELETED if start > offset else GapKind.TRUNCATED
        gaps.append(OffsetGap(topic, partition, kind, offset, start))
    return sorted(gaps)


def _cap(wanted: dict[TopicPartition, tuple[int, int]], budget: int) -> dict[TopicPartition, tuple[int, int]]:
    total = sum(e - s for s, e in wanted.values())
    shares = {tp: max(1, (e - s) * budget // total) for tp, (s, e) in wanted.items()}
    spare = budget - sum(shares.values())
    for tp in sorted(wanted, key=lambda t: wanted[t][1] - wanted[t][0], reverse=True):
        if spare <= 0:
            break
        s, e = wanted[tp]
        extra = min(spare, (e - s) - shares[tp])
        if extra > 0:
            shares[tp] += extra
            spare -= extra
    return {tp: (s, min(e, s + shares[tp])) for tp, (s, e) in wanted.items()}


def ranges_to_json(ranges: list[OffsetRange]) -> str:
    """``{"topic": {"partition": [start, end]}}`` (stable key order)."""
    out: dict[str, dict[str, list[int]]] = {}
    for r in sorted(ranges):
        out.setdefault(r.topic, {})[str(r.partition)] = [r.start, r.end]
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def ranges_from_json(text: str) -> list[OffsetRange]:
    """Inverse of :func:`ranges_to_json`."""
    data = json.loads(text)
    return sorted(OffsetRange(t, int(p), se[0], se[1]) for t, parts in data.items() for p, se in parts.items())


def end_offsets(ranges: list[OffsetRange]) -> dict[TopicPartition, int]:
    """Next offset to read per partition after ``ranges``."""
    return {(r.topic, r.partition): r.end for r in ranges}
