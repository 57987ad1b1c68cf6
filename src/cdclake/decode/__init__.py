"""Decode Debezium change events (Kafka Connect JsonConverter) from Kafka records into typed Spark DataFrames.

Public API: :func:`decode_records`, :func:`decode_counted`, :class:`DecodeOptions`, :class:`DecodedBatch`,
:class:`DecodeCounts`, :class:`TableId`, :class:`TableInfo`, :class:`RecordSampler`, the schema sources, and
:func:`read_jsonl` for captured fixtures. See docs/decoding.md.
"""

from __future__ import annotations

from cdclake.decode.batch import DecodedBatch, TableInfo
from cdclake.decode.counts import DecodeCounts
from cdclake.decode.options import DecodeOptions, RecordFormat, TableId
from cdclake.decode.pipeline import decode_counted, decode_records
from cdclake.decode.records import (
    KAFKA_RECORD_SCHEMA,
    STRING_RECORD_SCHEMA,
    RecordSampler,
    read_jsonl,
    records_from_dicts,
)
from cdclake.decode.schema_source import ConnectSchemaSource, NoSchemaSource, SchemaSource, column_schema

__all__ = [
    "KAFKA_RECORD_SCHEMA",
    "STRING_RECORD_SCHEMA",
    "ConnectSchemaSource",
    "DecodeCounts",
    "DecodeOptions",
    "DecodedBatch",
    "NoSchemaSource",
    "RecordFormat",
    "RecordSampler",
    "SchemaSource",
    "TableId",
    "TableInfo",
    "column_schema",
    "decode_counted",
    "decode_records",
    "read_jsonl",
    "records_from_dicts",
]
