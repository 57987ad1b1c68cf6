"""Planning a batch: which offset range of each topic-partition to read (pure functions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

#: (topic, partition)
TopicPartition = tuple[str, int]


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


def plan_ranges(
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Ranges from the committed offsets (or the earliest available) to the latest, capped.

    Args:
        committed: next offset to read per partition, from the last committed batch.
        earliest: first available offset per partition (log start).
        latest: end offset per partition (high watermark).
        max_records: cap on the records of the whole batch. The cap is shared out so that every
            partition with a backlog advances (at least one record each, then in proportion).

    Returns:
        Non-empty ranges, sorted by topic and partition.
    """
    wanted: dict[TopicPartition, tuple[int, int]] = {}
    for tp, end in latest.items():
        start = max(committed.get(tp, earliest.get(tp, 0)), earliest.get(tp, 0))
        if end > start:
            wanted[tp] = (start, end)
    if max_records is not None and sum(e - s for s, e in wanted.values()) > max_records:
        wanted = _cap(wanted, max(max_records, len(wanted)))
    return sorted(OffsetRange(t, p, s, e) for (t, p), (s, e) in wanted.items())


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
