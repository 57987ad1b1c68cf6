"""Captured records from a live stack (tests/fixtures/captures/*.jsonl) decode; known gaps are pinned."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdclake.decode import DecodeOptions, decode_records, read_jsonl

CAPTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "captures").glob("*_schemas.jsonl"))

#: Dead-letter reasons still expected from the live captures: none (notification and schema-history topics are
#: skipped and counted, NUMERIC(50,10) / DECIMAL(65,10) decode losslessly to strings).
KNOWN_GAPS: set[str] = set()


@pytest.mark.spark
@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_capture_decodes(spark: SparkSession, path: Path) -> None:
    batch = decode_records(read_jsonl(spark, path), options=DecodeOptions())
    reasons = {r["reason"] for r in batch.dead_letters.collect()}
    assert reasons <= KNOWN_GAPS
    counts = batch.counts()
    assert counts["dead_letters"] == 0
    assert counts["notifications_skipped"] == 4
    assert counts["schema_history_skipped"] == (12 if path.name.startswith("mariadb") else 0)
    assert len(batch.tables) == 1
    (frame,) = batch.tables.values()
    assert frame.count() > 0
