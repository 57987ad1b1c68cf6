"""Fixtures for ingestion tests: run batches of hand-built records through the real decoder into the session lake."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.decode.records import records_from_dicts
from cdclake.ingest.batch import run_batch
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.sources import FrameRecordSource, source_topic_patterns
from cdclake.ingest.summary import BatchSummary

from .events import PgTable

RunBatch = Callable[..., BatchSummary]


@pytest.fixture
def prefix() -> str:
    """A topic prefix of its own per test, so tables and ledgers never collide in the session lake."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def table(prefix: str) -> PgTable:
    return PgTable(prefix=prefix, table="items")


@pytest.fixture
def ingest(spark: SparkSession, prefix: str) -> RunBatch:
    """Run one batch over *all* records produced so far (the log grows like a topic)."""
    log: list[dict[str, Any]] = []

    def run(
        *records: list[dict[str, Any]], source: SourceConfig | None = None, max_records: int | None = None
    ) -> BatchSummary:
        for recs in records:
            log.extend(recs)
        frame = records_from_dicts(spark, log)
        cfg = source or SourceConfig(name=prefix, topic_prefix=prefix)
        return run_batch(spark, cfg, FrameRecordSource(frame, source_topic_patterns(prefix)), max_records=max_records)

    return run


def rows(spark: SparkSession, prefix: str, table: str = "items", cols: str = "id, name, qty") -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(f"SELECT {cols} FROM lake.{prefix}.inventory.{table} ORDER BY id").collect()]
