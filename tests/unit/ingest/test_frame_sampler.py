"""``FrameSampler``: the replay path's discovery sample, taken at the Kafka sampler's points by one filter."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdclake.decode import records_from_dicts
from cdclake.ingest.offsets import OffsetRange
from cdclake.ingest.sources import FrameSampler, fetch_windows, spread_points

pytestmark = pytest.mark.spark


def _frame(spark: SparkSession, skip: frozenset[tuple[str, int, int]] = frozenset()) -> DataFrame:
    rows = [
        {"topic": t, "partition": p, "offset": o, "key": None, "value": f"{t}:{p}:{o}"}
        for t in ("a", "b")
        for p in (0, 1)
        for o in range(6)
        if (t, p, o) not in skip
    ]
    return records_from_dicts(spark, rows)


RANGES = [OffsetRange("a", 0, 1, 4), OffsetRange("a", 1, 0, 6), OffsetRange("b", 1, 5, 6), OffsetRange("b", 0, 3, 3)]


def test_spread_takes_the_kafka_samplers_points(spark: SparkSession) -> None:
    # the same points as KafkaSampler (tests/integration/test_kafka_source.py): first, every count // 3, last
    expected = [("a", 0, 1), ("a", 0, 2), ("a", 0, 3), ("a", 1, 0), ("a", 1, 2), ("a", 1, 4), ("a", 1, 5), ("b", 1, 5)]
    assert spread_points(RANGES) == expected
    got = FrameSampler(_frame(spark), RANGES).spread().collect()
    assert sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in got) == [
        (t, p, o, f"{t}:{p}:{o}") for t, p, o in expected
    ]


def test_points_missing_from_the_frame_are_not_in_the_sample(spark: SparkSession) -> None:
    sampler = FrameSampler(_frame(spark, skip=frozenset({("a", 1, 2), ("a", 0, 3)})), RANGES)
    got = sorted((r["topic"], r["partition"], r["offset"]) for r in sampler.spread().collect())
    assert got == [("a", 0, 1), ("a", 0, 2), ("a", 1, 0), ("a", 1, 4), ("a", 1, 5), ("b", 1, 5)]
    points = [("b", 0, 4), ("a", 1, 5)]
    assert sorted((r["topic"], r["partition"], r["offset"]) for r in sampler.at(points).collect()) == sorted(points)
    assert sampler.at([]).count() == 0
    assert FrameSampler(_frame(spark), []).spread().count() == 0


def test_the_driver_reads_a_partitions_points_in_windows_one_seek_each() -> None:
    assert fetch_windows([7, 3, 3, 5, 900, 1000, 1257]) == [[3, 5, 7], [900, 1000], [1257]]
    assert fetch_windows([0, 2, 4], gap=1) == [[0], [2], [4]]
    assert fetch_windows([]) == []
