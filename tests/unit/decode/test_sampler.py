"""Discovery through a :class:`cdclake.decode.RecordSampler` decodes exactly what discovery by passes decodes.

The ingestion job's sampler reads single records from Kafka (tests/integration/test_kafka_source.py); here a
sampler over the captured records themselves stands in for the broker, to compare the two discovery paths on
real captures without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.decode import DecodeOptions, decode_records, read_jsonl

pytestmark = pytest.mark.spark

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"


class FrameSampler:
    """Samples a records frame: each topic-partition's last record only (the fewest a sampler gives)."""

    def __init__(self, frame: DataFrame) -> None:
        self.frame, self.spread_calls, self.points = frame, 0, []  # type: ignore[var-annotated]

    def spread(self) -> DataFrame:
        self.spread_calls += 1
        last = self.frame.groupBy("topic", "partition").agg(F.max("offset").alias("offset"))
        return self.frame.join(last, ["topic", "partition", "offset"])

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        self.points += list(points)
        wanted = self.frame.sparkSession.createDataFrame(list(points), "topic string, partition int, offset long")
        return self.frame.join(wanted, ["topic", "partition", "offset"])


def _rows(frame: DataFrame) -> list[str]:
    # compared as text: the captures hold NaN doubles, and NaN != NaN
    return sorted(repr(tuple(r)) for r in frame.collect())


@pytest.mark.parametrize("capture", ["pg_all_types_schemas.jsonl", "mariadb_ddl_sequence.jsonl"])
def test_sampled_discovery_decodes_the_same_rows_and_side_outputs(spark: SparkSession, capture: str) -> None:
    records = read_jsonl(spark, CAPTURES / capture).persist()
    options = DecodeOptions(include_before=False)
    by_passes = decode_records(records, options=options)
    sampler = FrameSampler(records)
    sampled = decode_records(records, options=options, sampler=sampler)

    assert sampler.spread_calls == 1 and sampler.points, "discovery must take its samples from the sampler"
    assert sampled.table_info == by_passes.table_info
    assert sampled.schema_cuts == by_passes.schema_cuts
    assert set(sampled.tables) == set(by_passes.tables)
    for table_id, frame in by_passes.tables.items():
        assert _rows(sampled.tables[table_id]) == _rows(frame), table_id
    for name in ("transactions", "schema_changes"):
        assert _rows(getattr(sampled, name)) == _rows(getattr(by_passes, name)), name
    assert sampled.dead_letters.count() == by_passes.dead_letters.count() == 0
    records.unpersist()
