"""cdclake.demo.topics.topic_end_offsets: per-topic sums of KafkaRecordSource's end offsets (a fake consumer)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cdclake.demo.topics import topic_end_offsets
from cdclake.ingest.sources import KafkaRecordSource

#: topic -> partition -> (low, high)
WATERMARKS = {
    "pg.inventory.orders": {0: (0, 7), 1: (2, 5)},
    "pgXinventory.orders": {0: (0, 100)},  # '.' is not a wildcard: never counted for pg.inventory.orders
    "pg.inventory.customers": {0: (0, 3)},
}


class _Consumer:
    closed = False

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(
            topics={t: SimpleNamespace(partitions=dict.fromkeys(parts)) for t, parts in WATERMARKS.items()}
        )

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return WATERMARKS[tp.topic][tp.partition]

    def close(self) -> None:
        _Consumer.closed = True


def test_end_offsets_add_up_each_topics_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("confluent_kafka")
    monkeypatch.setattr(KafkaRecordSource, "_consumer", lambda self: _Consumer())
    assert topic_end_offsets("kafka.test:9092", ["pg.inventory.orders", "pg.inventory.missing"]) == {
        "pg.inventory.orders": 12,
        "pg.inventory.missing": 0,
    }
    assert _Consumer.closed
