"""``schema_source: lake``: the Connect schema of each lake column, from its comment and its Iceberg type."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from cdclake.exceptions import ConnectSchemaError
from cdclake.lake.schema_source import LakeSchemaSource, iceberg_field_schema


def _schema(column: NestedField) -> tuple[Any, ...]:
    out = iceberg_field_schema(column)
    return out["type"], out.get("name"), out.get("parameters"), out["optional"]


def test_the_comment_the_job_writes_gives_back_the_connect_type() -> None:
    assert _schema(NestedField(1, "a", IntegerType(), doc="int16")) == ("int16", None, None, True)
    assert _schema(NestedField(2, "b", LongType(), doc="io.debezium.time.MicroTime", required=True)) == (
        "int64",
        "io.debezium.time.MicroTime",
        None,
        False,
    )
    assert _schema(NestedField(3, "c", DecimalType(12, 2), doc="org.apache.kafka.connect.data.Decimal")) == (
        "bytes",
        "org.apache.kafka.connect.data.Decimal",
        {"scale": "2", "connect.decimal.precision": "12"},
        True,
    )
    assert _schema(NestedField(4, "d", StringType(), doc="io.debezium.data.Json"))[:2] == (
        "string",
        "io.debezium.data.Json",
    )
    assert _schema(NestedField(5, "e", DateType(), doc="io.debezium.time.Date"))[:2] == (
        "int32",
        "io.debezium.time.Date",
    )


def test_without_a_comment_the_iceberg_type_decides() -> None:
    assert _schema(NestedField(1, "a", TimestampType()))[:2] == ("int64", "io.debezium.time.MicroTimestamp")
    assert _schema(NestedField(2, "b", TimestamptzType()))[:2] == ("string", "io.debezium.time.ZonedTimestamp")
    assert _schema(NestedField(3, "c", DoubleType()))[:2] == ("float64", None)
    listed = iceberg_field_schema(NestedField(4, "d", ListType(5, StringType(), element_required=False)))
    assert listed["type"] == "array" and listed["items"] == {"type": "string", "optional": True}
    with pytest.raises(ConnectSchemaError, match="'m'.*no Connect counterpart"):
        iceberg_field_schema(NestedField(6, "m", MapType(7, StringType(), 8, StringType())))


def test_the_lake_source_reads_the_table_without_metadata_columns(tmp_path: Any) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace(("pg", "inventory"))
    catalog.create_table(
        ("pg", "inventory", "items"),
        Schema(
            NestedField(1, "id", LongType(), required=True, doc="int64"),
            NestedField(2, "name", StringType(), doc="string"),
            NestedField(3, "_cdc_op", StringType()),
        ),
    )
    source = LakeSchemaSource(catalog, lambda table: f"pg.{table}")
    assert [f["field"] for f in source.row_fields("t", "inventory.items") or []] == ["id", "name"]
    assert source.row_fields("t", "inventory.nothing") is None
