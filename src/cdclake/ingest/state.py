"""Batch state of a source in the lake (``lake.cdc_audit.batches``): the exactly-once ledger.

Every batch writes two rows: ``planned`` (its exact offset ranges, before any table is touched) and
``committed`` (after every table has been applied, with the batch summary). The next batch starts
at the ``next_offsets`` of the last committed row; a ``planned`` row without its ``committed`` row
is a batch interrupted by a crash, and the next run redoes exactly those ranges.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.ingest.naming import AUDIT_NAMESPACE, audit_table
from cdclake.ingest.plan import OffsetRange, TopicPartition, ranges_from_json, ranges_to_json
from cdclake.lake.catalog import CATALOG_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BATCHES = "batches"
PLANNED = "planned"
COMMITTED = "committed"

BATCHES_DDL = f"""CREATE TABLE IF NOT EXISTS {{name}} (
  source STRING NOT NULL,
  batch_id STRING NOT NULL,
  seq BIGINT NOT NULL,
  status STRING NOT NULL,
  ranges STRING,
  next_offsets STRING,
  recorded_at TIMESTAMP,
  summary STRING
) USING iceberg TBLPROPERTIES ('format-version'='2', 'comment'='cdclake batch ledger ({PLANNED}/{COMMITTED} rows)')"""


@dataclass(frozen=True)
class BatchRecord:
    """One row of the ledger."""

    source: str
    batch_id: str
    seq: int
    status: str
    ranges: list[OffsetRange]
    next_offsets: dict[TopicPartition, int]
    recorded_at: datetime | None = None


def _offsets_to_json(offsets: dict[TopicPartition, int]) -> str:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), value in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = value
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _offsets_from_json(text: str | None) -> dict[TopicPartition, int]:
    if not text:
        return {}
    return {(t, int(p)): int(v) for t, parts in json.loads(text).items() for p, v in parts.items()}


class BatchLedger:
    """Reads and appends the ledger rows of one source."""

    def __init__(self, spark: SparkSession, source: str) -> None:
        self.spark = spark
        self.source = source
        self.name = audit_table(BATCHES)

    _ensured: set[tuple[str, str]] = set()

    def ensure(self) -> None:
        """Create the audit namespace and the ledger table once per Spark application."""
        marker = (self.spark.sparkContext.applicationId, self.name)
        if marker in BatchLedger._ensured:
            return
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{AUDIT_NAMESPACE}")
        self.spark.sql(BATCHES_DDL.format(name=self.name))
        BatchLedger._ensured.add(marker)

    def last(self) -> tuple[BatchRecord | None, BatchRecord | None]:
        """(last committed batch, interrupted batch to redo or None)."""
        rows = (
            self.spark.table(self.name).where(f"source = '{self.source.replace(chr(39), '')}'").orderBy("seq").collect()
        )
        records = [
            BatchRecord(
                source=row["source"],
                batch_id=row["batch_id"],
                seq=int(row["seq"]),
                status=row["status"],
                ranges=ranges_from_json(row["ranges"]) if row["ranges"] else [],
                next_offsets=_offsets_from_json(row["next_offsets"]),
                recorded_at=row["recorded_at"],
            )
            for row in rows
        ]
        done = {r.batch_id for r in records if r.status == COMMITTED}
        committed = max((r for r in records if r.status == COMMITTED), key=lambda r: r.seq, default=None)
        floor = committed.seq if committed else 0
        pending = max(
            (r for r in records if r.status == PLANNED and r.batch_id not in done and r.seq > floor),
            key=lambda r: r.seq,
            default=None,
        )
        return committed, pending

    def new_batch_id(self) -> str:
        return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"

    def append(
        self,
        rec: BatchRecord,
        summary: dict[str, Any] | None = None,
    ) -> datetime:
        """Append a row; returns its ``recorded_at`` (naive local time, as PySpark returns timestamps)."""
        from pyspark.sql import Row

        recorded_at = rec.recorded_at or datetime.now()

        row = Row(
            source=rec.source,
            batch_id=rec.batch_id,
            seq=rec.seq,
            status=rec.status,
            ranges=ranges_to_json(rec.ranges),
            next_offsets=_offsets_to_json(rec.next_offsets),
            recorded_at=recorded_at,
            summary=json.dumps(summary, sort_keys=True, default=str) if summary is not None else None,
        )
        frame = self.spark.createDataFrame([row], self.spark.table(self.name).schema)
        frame.writeTo(self.name).option("snapshot-property.cdc.batch-id", rec.batch_id).append()
        return recorded_at
