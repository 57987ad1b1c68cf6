"""The ``_cdc_*`` metadata columns: each one's name, Spark SQL type and where its value comes from.

Change rows carry them after their data columns (docs/decoding.md, "Output contract"); the lake tables store
:data:`LAKE_META_COLUMNS`. The envelope decoder (``jvm/decoder``) knows none of these names: it returns the
outputs its plan lists, and the plan lists them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.sql import quote_identifier

_S = T.StringType()


class Origin(StrEnum):
    """Where a metadata column's value comes from."""

    #: the envelope decoder's output named ``source`` (:mod:`cdclake.decode.jvm`)
    DECODER = "decoder"
    #: the Kafka record's column named ``source`` (:data:`cdclake.decode.records.STRING_RECORD_SCHEMA`)
    RECORD = "record"
    #: the text of the record's first Kafka header with the key ``source``
    HEADER = "header"
    #: set by the ingestion job when it writes the row (not a column of the change rows)
    INGEST = "ingest"


@dataclass(frozen=True)
class MetaColumn:
    """One metadata column.

    Attributes:
        name: the column's name.
        type: its Spark type; None for ``_cdc_before``, the row image's type (text for a document store).
        origin: where its value comes from.
        source: the decoder output, record column or header key it is read from (None for :attr:`Origin.INGEST`).
    """

    name: str
    type: T.DataType | None
    origin: Origin
    source: str | None = None

    @property
    def sql_type(self) -> str:
        """The Spark SQL DDL spelling of :attr:`type` (e.g. ``ARRAY<DECIMAL(38,0)>``)."""
        if self.type is None:
            raise ValueError(f"{self.name} has the row image's type")
        return _sql(self.type)


def _sql(dtype: T.DataType) -> str:
    if isinstance(dtype, T.ArrayType):
        return f"ARRAY<{_sql(dtype.elementType)}>"
    if isinstance(dtype, T.StructType):
        return (
            "STRUCT<" + ", ".join(f"{quote_identifier(fld.name)}: {_sql(fld.dataType)}" for fld in dtype.fields) + ">"
        )
    return dtype.simpleString().upper()


def _decoded(name: str, dtype: T.DataType | None, output: str) -> MetaColumn:
    return MetaColumn(name, dtype, Origin.DECODER, output)


#: The metadata columns of every change row, in order.
CHANGE_COLUMNS: tuple[MetaColumn, ...] = (
    _decoded("_cdc_op", _S, "op"),
    _decoded("_cdc_position", T.ArrayType(T.DecimalType(38, 0)), "position"),
    _decoded("_cdc_source_ts", T.TimestampType(), "source_ts"),
    _decoded("_cdc_tx_id", _S, "tx_id"),
    _decoded("_cdc_tx_total_order", T.LongType(), "tx_total_order"),
    _decoded("_cdc_tx_data_collection_order", T.LongType(), "tx_data_collection_order"),
    MetaColumn("_cdc_topic", _S, Origin.RECORD, "topic"),
    MetaColumn("_cdc_partition", T.IntegerType(), Origin.RECORD, "partition"),
    MetaColumn("_cdc_offset", T.LongType(), Origin.RECORD, "offset"),
    MetaColumn("_cdc_kafka_ts", T.TimestampType(), Origin.RECORD, "timestamp"),
    _decoded("_cdc_snapshot", _S, "snapshot"),
    _decoded("_cdc_connector", _S, "connector"),
    _decoded("_cdc_db", _S, "db"),
    _decoded("_cdc_schema", _S, "schema"),
    _decoded("_cdc_table", _S, "table"),
    _decoded("_cdc_keep_columns", T.ArrayType(_S), "keep_columns"),
    MetaColumn("_cdc_old_key", _S, Origin.HEADER, f.HEADER_OLD_KEY),
    MetaColumn("_cdc_new_key", _S, Origin.HEADER, f.HEADER_NEW_KEY),
)
#: The record's raw key text (optional).
KEY = MetaColumn("_cdc_key", _S, Origin.RECORD, "key")
#: The decoded before-image (optional for a relational table).
BEFORE = _decoded("_cdc_before", None, "before")
#: MongoDB's before-image and partial updates (a document store's change rows).
DOCUMENT_COLUMNS: tuple[MetaColumn, ...] = (
    BEFORE,
    _decoded("_cdc_patch", _S, "patch"),
    _decoded("_cdc_filter", _S, "filter"),
    _decoded("_cdc_updated_fields", _S, "updated_fields"),
    _decoded("_cdc_removed_fields", T.ArrayType(_S), "removed_fields"),
    _decoded(
        "_cdc_truncated_arrays",
        T.ArrayType(T.StructType([T.StructField("field", _S), T.StructField("size", T.IntegerType())])),
        "truncated_arrays",
    ),
)
#: PostgreSQL's logical decoding messages (``op = m``).
MESSAGE_COLUMNS: tuple[MetaColumn, ...] = (
    _decoded("_cdc_message_prefix", _S, "message_prefix"),
    _decoded("_cdc_message_content", T.BinaryType(), "message_content"),
)
INGESTED_AT = MetaColumn("_cdc_ingested_at", T.TimestampType(), Origin.INGEST)

#: Every metadata column.
META_COLUMNS: tuple[MetaColumn, ...] = (*CHANGE_COLUMNS, KEY, *DOCUMENT_COLUMNS, *MESSAGE_COLUMNS, INGESTED_AT)
BY_NAME: dict[str, MetaColumn] = {c.name: c for c in META_COLUMNS}
#: The column holding the record's topic (a constant of each decoded topic).
TOPIC = BY_NAME["_cdc_topic"]

#: The metadata columns every lake table stores after its source columns, in the table's order: (name, Spark
#: SQL type).
LAKE_META_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (BY_NAME[name].name, BY_NAME[name].sql_type)
    for name in (
        "_cdc_op", "_cdc_source_ts", "_cdc_position", "_cdc_tx_id", "_cdc_topic", "_cdc_partition", "_cdc_offset",
        "_cdc_ingested_at",
    )
)  # fmt: skip
LAKE_META_NAMES = tuple(name for name, _ in LAKE_META_COLUMNS)


def change_columns(*, document_store: bool, before: bool, key: bool, messages: bool) -> tuple[MetaColumn, ...]:
    """The metadata columns of a data topic's change rows, in order.

    Args:
        document_store: the topic's connector writes documents (MongoDB): its partial updates and before-image.
        before: a relational topic's decoded before-image.
        key: the record's raw key text.
        messages: the connector's logical decoding messages (PostgreSQL).
    """
    columns = [*CHANGE_COLUMNS]
    if key:
        columns.append(KEY)
    if document_store:
        columns += DOCUMENT_COLUMNS
    elif before:
        columns.append(BEFORE)
    if messages:
        columns += MESSAGE_COLUMNS
    return tuple(columns)
