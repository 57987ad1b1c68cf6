"""The input contract (Kafka records as Spark's Kafka source gives them) and a JSON Lines loader for captures."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HEADER_TYPE = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))

#: Spark's Kafka source schema with ``includeHeaders=true``.
KAFKA_RECORD_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("headers", HEADER_TYPE),
    ]
)

#: Input accepted by :func:`cdclake.decode.decode_records` when keys/values are already strings.
STRING_RECORD_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
        T.StructField("headers", HEADER_TYPE),
    ]
)


@dataclass(frozen=True)
class SampleRecord:
    """One sampled Kafka record, in the driver (key and value decoded as UTF-8 text)."""

    topic: str
    partition: int
    offset: int
    timestamp: datetime | None
    key: str | None
    value: str | None


class RecordSampler(Protocol):
    """Reads a few of a batch's records without scanning the batch (the ingestion job's Kafka source does).

    :func:`cdclake.decode.decode_records` takes one to find the schema versions of a batch in two small reads
    instead of two passes over every record. ``spread`` and ``at`` return records in the input contract's
    schema; ``spread_rows`` the same records as ``spread``, in the driver.
    """

    def spread(self) -> DataFrame:
        """Records from every part of the batch: each partition's first and last, and some in between."""

    def spread_rows(self) -> list[SampleRecord]:
        """The records of :meth:`spread`, in the driver."""

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        """The batch's records at these ``(topic, partition, offset)`` coordinates."""


def sample_records(frame: DataFrame) -> list[SampleRecord]:
    """The records of a (small) frame in the driver (:meth:`RecordSampler.spread_rows` of a frame)."""
    return [
        SampleRecord(r["topic"], int(r["partition"]), int(r["offset"]), r["timestamp"], r["key"], r["value"])
        for r in normalise_records(frame).collect()
    ]


def normalise_records(records: DataFrame) -> DataFrame:
    """Project records onto :data:`STRING_RECORD_SCHEMA` (binary key/value decoded as UTF-8; missing headers null)."""
    cols = set(records.columns)
    headers = F.col("headers").cast(HEADER_TYPE) if "headers" in cols else F.lit(None).cast(HEADER_TYPE)
    timestamp = F.col("timestamp").cast("timestamp") if "timestamp" in cols else F.lit(None).cast("timestamp")
    return records.select(
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        timestamp.alias("timestamp"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        headers.alias("headers"),
    )


def _to_row(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    ts = obj.get("timestamp")
    if isinstance(ts, int | float):
        stamp: datetime | None = datetime.fromtimestamp(ts / 1000, tz=UTC)
    elif isinstance(ts, str):
        stamp = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    else:
        stamp = None
    headers = obj.get("headers")
    if isinstance(headers, Mapping):
        headers = [{"key": k, "value": v} for k, v in headers.items()]
    header_rows = (
        None
        if headers is None
        else [(h["key"], None if h.get("value") is None else str(h["value"]).encode()) for h in headers]
    )
    return (
        obj["topic"],
        int(obj.get("partition", 0)),
        int(obj["offset"]),
        stamp,
        obj.get("key"),
        obj.get("value"),
        header_rows,
    )


def records_from_dicts(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    """Build an input DataFrame from dicts ``{"topic","partition","offset","timestamp","key","value","headers"}``.

    ``key``/``value`` are the exact record strings (or ``None``); ``timestamp`` is epoch millis or ISO-8601;
    ``headers`` is a list of ``{"key", "value"}`` (values as strings) or a dict.
    """
    return spark.createDataFrame([_to_row(r) for r in rows], STRING_RECORD_SCHEMA)


def read_jsonl(spark: SparkSession, paths: str | Path | Iterable[str | Path]) -> DataFrame:
    """Load captured records from JSON Lines files (one record per line, see :func:`records_from_dicts`).

    Args:
        spark: the session.
        paths: one path or several; directories are expanded to their ``*.jsonl`` files.

    Returns:
        A DataFrame with :data:`STRING_RECORD_SCHEMA`.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.jsonl")) if p.is_dir() else [p])
    rows = [json.loads(line) for file in files for line in file.read_text().splitlines() if line.strip()]
    return records_from_dicts(spark, rows)
