"""Record Kafka topics into JSON Lines (the capture/replay format), keys and values as exact strings.

One record per line::

    {"topic": "pg.inventory.orders", "partition": 0, "offset": 17, "timestamp": 1795241158286,
     "key": "{\\"schema\\":…,\\"payload\\":{\\"id\\":1}}", "value": "…", "headers": [{"key": "…", "value": "…"}]}

``key``/``value`` are the converter's exact bytes decoded as UTF-8 (JsonConverter writes UTF-8 JSON),
``null`` for a null key or a tombstone; ``timestamp`` is epoch milliseconds; header values are strings.
``cdclake.decode.records.read_jsonl`` reads it back; ``cdclake replay`` ingests it.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cdclake.exceptions import CdcError

logger = logging.getLogger(__name__)


class CaptureError(CdcError, RuntimeError):
    """Recording topics failed (broker unreachable, or the end of a topic was not reached in time)."""


@dataclass(frozen=True)
class CapturedRange:
    """What was recorded from one topic-partition: offsets ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


def _text(raw: bytes | None, where: str) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaptureError(f"{where}: not UTF-8 (the capture format holds JsonConverter output): {exc}") from exc


def record_to_json(msg: Any) -> dict[str, Any]:
    """Render one confluent-kafka message in the capture format (pure apart from reading ``msg``)."""
    where = f"{msg.topic()}/{msg.partition()}@{msg.offset()}"
    _, ts = msg.timestamp()
    headers = msg.headers()
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts,
        "key": _text(msg.key(), where + " key"),
        "value": _text(msg.value(), where + " value"),
        "headers": None
        if headers is None
        else [{"key": k, "value": _text(v, f"{where} header {k}")} for k, v in headers],
    }


def matching_topics(all_topics: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """Topics whose names fully match one of the regular expressions, sorted; internal topics excluded."""
    compiled = [re.compile(p) for p in patterns]
    return sorted(t for t in all_topics if not t.startswith("__") and any(p.fullmatch(t) for p in compiled))


def prefix_patterns(topic_prefix: str) -> list[str]:
    """Every topic a Debezium connector with ``topic.prefix`` writes: data, schema changes, transactions,
    heartbeats, notifications and its signal topic."""
    p = re.escape(topic_prefix)
    return [rf"{p}", rf"{p}\..+", rf"__debezium-heartbeat\.{p}", rf"{p}-signal"]


def capture(
    bootstrap: str,
    patterns: Iterable[str],
    out: IO[str],
    *,
    timeout_s: float = 60.0,
    on_record: Callable[[int], None] | None = None,
) -> list[CapturedRange]:
    """Write every record of the matching topics, from the beginning to their current end, to ``out``.

    The end of each partition is its high watermark when the capture starts, so the capture is a
    bounded, reproducible cut. Records are written in (topic, partition, offset) order.

    Raises:
        CaptureError: when the broker cannot be reached or a partition's end is not reached in time.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cdclake-capture-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    try:
        try:
            metadata = consumer.list_topics(timeout=10)
        except Exception as exc:  # noqa: BLE001 - librdkafka raises KafkaException
            raise CaptureError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        ranges: list[CapturedRange] = []
        for topic in matching_topics(metadata.topics, patterns):
            for partition in sorted(metadata.topics[topic].partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                if high > low:
                    ranges.append(CapturedRange(topic, partition, low, high))
        for rng in ranges:
            for record in _read_range(consumer, rng, timeout_s):
                out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
                if on_record:
                    on_record(1)
        return ranges
    finally:
        consumer.close()


def _read_range(consumer: Any, rng: CapturedRange, timeout_s: float) -> Iterator[dict[str, Any]]:
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    next_offset = rng.start
    deadline = time.monotonic() + timeout_s
    while next_offset < rng.end:
        if time.monotonic() > deadline:
            raise CaptureError(
                f"{rng.topic}/{rng.partition}: reached offset {next_offset} of {rng.end} in {timeout_s:.0f}s"
            )
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise CaptureError(f"{rng.topic}/{rng.partition}@{next_offset}: {msg.error()}")
        if msg.offset() >= rng.end:
            break
        next_offset = msg.offset() + 1
        yield record_to_json(msg)
    consumer.unassign()


def capture_to_file(bootstrap: str, patterns: Iterable[str], path: Path, **kwargs: Any) -> list[CapturedRange]:
    """:func:`capture` into ``path`` (written atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        ranges = capture(bootstrap, patterns, fh, **kwargs)
    tmp.replace(path)
    return ranges
