"""The read phase: what the batch decodes, and what it holds for a quarantined table."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.decode import records_from_dicts
from cdclake.ingest.batch.context import BatchContext
from cdclake.ingest.batch.read import read_records
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.offsets import OffsetRange
from cdclake.ingest.sources import FrameRecordSource

pytestmark = pytest.mark.spark

T = "pg.inventory.items"


class _Uncached(FrameRecordSource):
    """A source read again for every pass, as Kafka is; ``headers=False`` leaves the column out, as Spark's Kafka
    source does (the broker itself is exercised by tests/integration/test_kafka_source.py)."""

    cache_records = False

    def __init__(self, frame: DataFrame) -> None:
        super().__init__(frame)
        self.calls: list[bool] = []

    def read(self, spark: SparkSession, ranges: Any, headers: bool = True) -> DataFrame:
        self.calls.append(headers)
        frame = super().read(spark, ranges)
        return frame if headers else frame.drop("headers")

    def sampler(self, spark: SparkSession, ranges: Any) -> None:
        return None


def _records(spark: SparkSession) -> DataFrame:
    rows = [
        {"topic": T, "partition": 0, "offset": o, "key": "{}", "value": "{}", "headers": [{"key": "h", "value": "v"}]}
        for o in range(3)
    ]
    return records_from_dicts(spark, rows)


def _read(spark: SparkSession, source: FrameRecordSource) -> Any:
    ctx = BatchContext(spark, SourceConfig(name="pg", topic_prefix="pg"), source, None)  # type: ignore[arg-type]
    return read_records(ctx, SimpleNamespace(ranges=[OffsetRange(T, 0, 0, 3)], replays=None))  # type: ignore[arg-type]


def test_a_source_read_again_is_decoded_without_headers_and_held_with_them(spark: SparkSession) -> None:
    source = _Uncached(_records(spark))
    records = _read(spark, source)
    assert source.calls == [False]  # the records with their headers are read only for a held table
    assert records.frame.where(F.col("value").isNotNull()).count() == 3
    assert source.calls == [False]
    assert [r["headers"] for r in records.frame.orderBy("offset").collect()] == [None] * 3
    held = records.whole.orderBy("offset").collect()
    assert [(r["offset"], [(h["key"], h["value"]) for h in r["headers"]]) for r in held] == [
        (o, [("h", b"v")]) for o in range(3)
    ]
    assert source.calls == [False, True]
    assert records.whole is records.whole and source.calls == [False, True]


def test_a_cached_source_is_read_once_with_its_headers(spark: SparkSession) -> None:
    records = _read(spark, FrameRecordSource(_records(spark)))
    try:
        assert records.whole is records.frame
        assert all(r["headers"] is not None for r in records.frame.collect())
    finally:
        records.release()
