"""Iceberg table schemas from decoded Debezium schemas, and schema evolution planning (pure).

Policies (per table, from the connector spec's ``lake.schema_policy``):

* ``evolve`` (default): new columns are added; safe widenings applied (int->long, float->double,
  decimal precision up with the same scale); a column missing from the events is kept and filled
  with nulls from then on; an incompatible change quarantines the table;
* ``fail``: any change other than none raises :class:`cdclake.exceptions.SchemaEvolutionError`;
* ``quarantine``: any change quarantines the table (its events are held in ``cdc_audit.quarantine``).

A quarantined table stays so until it is released (:mod:`cdclake.ingest.quarantine`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from pyspark.sql import types as T

from cdclake.sql import quote_identifier


class ChangeKind(StrEnum):
    ADD = "add_column"
    WIDEN = "widen_column"
    MISSING = "column_missing_in_source"
    INCOMPATIBLE = "incompatible_type_change"


@dataclass(frozen=True)
class ColumnChange:
    """One difference between the lake table and the decoded schema."""

    kind: ChangeKind
    column: str
    old_type: str | None
    new_type: str | None

    def describe(self) -> str:
        return f"{self.kind.value} {self.column}: {self.old_type or '-'} -> {self.new_type or '-'}"


_KINDS = "|".join(k.value for k in ChangeKind)
_DESCRIBED = re.compile(rf"(?:^|[:;] )({_KINDS}) (\S+): (.+?) -> (.+?)(?=; (?:{_KINDS}) |$)")


def parse_changes(text: str) -> list[ColumnChange]:
    """The changes :meth:`ColumnChange.describe` wrote into ``text`` (a quarantine reason), in order (pure)."""
    return [
        ColumnChange(ChangeKind(kind), column, None if old == "-" else old, None if new == "-" else new)
        for kind, column, old, new in _DESCRIBED.findall(text)
    ]


def unresolved_changes(changes: list[ColumnChange], lake_types: Mapping[str, str]) -> list[ColumnChange]:
    """Incompatible changes the lake table still has: the column exists with its old type (pure).

    Args:
        changes: e.g. from :func:`parse_changes`.
        lake_types: the lake table's column types now, in Spark SQL spelling (``STRING``, ``BIGINT``, …).
    """

    def norm(spelling: str | None) -> str:
        return (spelling or "").replace(" ", "").upper()

    return [
        c
        for c in changes
        if c.kind is ChangeKind.INCOMPATIBLE
        and c.column in lake_types
        and norm(lake_types[c.column]) == norm(c.old_type)
    ]


@dataclass(frozen=True)
class EvolutionPlan:
    """What to do to the lake table before applying a batch."""

    changes: tuple[ColumnChange, ...] = ()
    ddl: tuple[str, ...] = field(default=())

    @property
    def incompatible(self) -> tuple[ColumnChange, ...]:
        return tuple(c for c in self.changes if c.kind is ChangeKind.INCOMPATIBLE)


def spark_sql_type(dtype: T.DataType) -> str:
    """Spark SQL DDL spelling of a type (Iceberg-storable)."""
    if isinstance(dtype, T.TimestampNTZType):
        return "TIMESTAMP_NTZ"
    if isinstance(dtype, T.ArrayType):
        return f"ARRAY<{spark_sql_type(dtype.elementType)}>"
    if isinstance(dtype, T.MapType):
        return f"MAP<{spark_sql_type(dtype.keyType)}, {spark_sql_type(dtype.valueType)}>"
    if isinstance(dtype, T.StructType):
        return (
            "STRUCT<"
            + ", ".join(f"{quote_identifier(f.name)}: {spark_sql_type(f.dataType)}" for f in dtype.fields)
            + ">"
        )
    if isinstance(dtype, T.ByteType | T.ShortType):
        return "INT"  # Iceberg has no 8/16-bit integers
    return dtype.simpleString().upper()


def storable(dtype: T.DataType) -> T.DataType:
    """The type Iceberg stores for ``dtype`` (8/16-bit integers widen to int)."""
    if isinstance(dtype, T.ByteType | T.ShortType):
        return T.IntegerType()
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(storable(dtype.elementType), dtype.containsNull)
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, storable(f.dataType), f.nullable) for f in dtype.fields])
    return dtype


def _comment(fld: T.StructField) -> str:
    logical = fld.metadata.get("cdc.logical.type") or fld.metadata.get("cdc.connect.type")
    return f" COMMENT '{logical}'" if logical else ""


def create_table_ddl(
    name: str,
    schema: T.StructType,
    key_columns: tuple[str, ...],
    meta_columns: tuple[tuple[str, str], ...],
    partitioning: tuple[str, ...] = (),
    properties: dict[str, str] | None = None,
) -> str:
    """``CREATE TABLE`` for a source table: key columns NOT NULL, every other column nullable."""
    cols = []
    for fld in schema.fields:
        not_null = " NOT NULL" if fld.name in key_columns else ""
        cols.append(f"{quote_identifier(fld.name)} {spark_sql_type(fld.dataType)}{not_null}{_comment(fld)}")
    cols += [f"{quote_identifier(n)} {t}" for n, t in meta_columns]
    props = {"format-version": "2", **(properties or {})}
    ddl = f"CREATE TABLE IF NOT EXISTS {name} (\n  " + ",\n  ".join(cols) + "\n) USING iceberg"
    if partitioning:
        ddl += f" PARTITIONED BY ({', '.join(partitioning)})"
    ddl += " TBLPROPERTIES (" + ", ".join(f"'{k}'='{v}'" for k, v in sorted(props.items())) + ")"
    return ddl


def tombstone_table_ddl(name: str, schema: T.StructType, key_columns: tuple[str, ...]) -> str:
    """``CREATE TABLE`` for an upsert table's side table of delete tombstones: its key columns (NOT NULL),
    ``_cdc_position`` and ``_cdc_deleted_at``."""
    keys = ", ".join(
        f"{quote_identifier(f.name)} {spark_sql_type(storable(f.dataType))} NOT NULL"
        for f in schema.fields
        if f.name in key_columns
    )
    return (
        f"CREATE TABLE IF NOT EXISTS {name} ({keys}, _cdc_position ARRAY<DECIMAL(38,0)>, _cdc_deleted_at TIMESTAMP) "
        "USING iceberg TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read')"
    )


def identifier_fields_sql(name: str, key_columns: tuple[str, ...]) -> str:
    """``ALTER TABLE ... SET IDENTIFIER FIELDS`` of the key columns."""
    return f"ALTER TABLE {name} SET IDENTIFIER FIELDS {', '.join(quote_identifier(k) for k in key_columns)}"


def _widening(old: T.DataType, new: T.DataType) -> bool:
    if isinstance(old, T.IntegerType) and isinstance(new, T.LongType):
        return True
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    return (
        isinstance(old, T.DecimalType)
        and isinstance(new, T.DecimalType)
        and new.scale == old.scale
        and new.precision > old.precision
    )


def plan_evolution(table_name: str, lake: T.StructType, decoded: T.StructType, meta: tuple[str, ...]) -> EvolutionPlan:
    """Compare the lake table's data columns with the decoded schema (pure).

    Args:
        table_name: quoted Spark SQL table name, for the DDL.
        lake: the lake table's schema (including metadata columns).
        decoded: the batch's decoded data columns.
        meta: names of metadata columns (ignored in the comparison).
    """
    lake_fields = {f.name: f for f in lake.fields if f.name not in meta}
    changes: list[ColumnChange] = []
    ddl: list[str] = []
    for fld in decoded.fields:
        new_type = storable(fld.dataType)
        if fld.name not in lake_fields:
            changes.append(ColumnChange(ChangeKind.ADD, fld.name, None, spark_sql_type(new_type)))
            column = quote_identifier(fld.name)
            ddl.append(f"ALTER TABLE {table_name} ADD COLUMN {column} {spark_sql_type(new_type)}{_comment(fld)}")
            continue
        old_type = lake_fields[fld.name].dataType
        if old_type == new_type:
            continue
        if _widening(old_type, new_type):
            changes.append(ColumnChange(ChangeKind.WIDEN, fld.name, spark_sql_type(old_type), spark_sql_type(new_type)))
            ddl.append(
                f"ALTER TABLE {table_name} ALTER COLUMN {quote_identifier(fld.name)} TYPE {spark_sql_type(new_type)}"
            )
        elif _widening(new_type, old_type) or _same_family_narrower(old_type, new_type):
            # a narrower source type still fits the wider lake column: nothing to do
            continue
        else:
            changes.append(
                ColumnChange(ChangeKind.INCOMPATIBLE, fld.name, spark_sql_type(old_type), spark_sql_type(new_type))
            )
    decoded_names = {f.name for f in decoded.fields}
    for name, fld in lake_fields.items():
        if name not in decoded_names:
            changes.append(ColumnChange(ChangeKind.MISSING, name, spark_sql_type(fld.dataType), None))
    return EvolutionPlan(tuple(changes), tuple(ddl))


def _same_family_narrower(old: T.DataType, new: T.DataType) -> bool:
    ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    return isinstance(old, T.LongType) and isinstance(new, ints)
