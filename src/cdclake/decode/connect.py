"""Kafka Connect schema -> Spark: the decoded type of each column and the codec the envelope decoder reads it with.

The per-record work (parse, check, convert) is the JVM envelope decoder's (``jvm/decoder``,
:mod:`cdclake.decode.jvm`); this module plans it: for every Connect schema, the Spark type the column decodes to,
its field metadata, and a JSON codec spec the decoder builds its reader from. Values that cannot be represented (a
value too wide for its ``decimal(p<=38,s)`` column, invalid base64, a timestamp out of range) are flagged per row
and sent to dead letters, never guessed; decimals planned as text (precision > 38, VariableScaleDecimal) are exact
at any width. See ``docs/decoding.md`` for the full mapping table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.exceptions import ConnectSchemaError

logger = logging.getLogger(__name__)

#: Struct-field metadata keys carried on the decoded Spark schema (for the Iceberg schema and its evolution).
META_CONNECT_TYPE = "cdc.connect.type"
META_LOGICAL_TYPE = "cdc.logical.type"
META_PARAMETERS = "cdc.parameters"
META_OPTIONAL = "cdc.optional"

Codec = dict[str, Any]


@dataclass(frozen=True)
class TypePlan:
    """How one Connect schema is read and what it decodes to.

    Attributes:
        wire: the Spark type a JSON reader (``from_json``) would parse the value with: the JSON types the codec
            accepts (another JSON type makes the record a ``type_mismatch`` dead letter).
        spark: the decoded Spark type.
        codec: the envelope decoder's reader of the value (JSON-able; ``type`` and its parameters, see
            ``jvm/decoder``'s ``Codec``).
        metadata: struct-field metadata (Connect type, logical name, parameters).
    """

    wire: T.DataType
    spark: T.DataType
    codec: Codec
    metadata: dict[str, Any] = field(default_factory=dict)


_INT_KINDS = ("int8", "int16", "int32")

_PRIMITIVES: dict[str, tuple[T.DataType, Codec]] = {
    **{
        kind: (T.IntegerType(), {"type": "integral", "wire": "int", "as": "int", "bits": int(kind[3:])})
        for kind in _INT_KINDS
    },
    "int64": (T.LongType(), {"type": "integral", "wire": "long", "as": "long"}),
    "float32": (T.FloatType(), {"type": "float"}),
    "float64": (T.DoubleType(), {"type": "double"}),
    # JsonConverter's JSON schema spells the Connect FLOAT32/FLOAT64 types "float"/"double".
    "float": (T.FloatType(), {"type": "float"}),
    "double": (T.DoubleType(), {"type": "double"}),
    "boolean": (T.BooleanType(), {"type": "boolean"}),
    "string": (T.StringType(), {"type": "string"}),
}

#: Integer-carried logical types: the decoded type and the decoder's conversion of the integer.
_INTEGRAL_LOGICAL: dict[str, tuple[T.DataType, str]] = {
    f.DBZ_DATE: (T.DateType(), "date"),
    f.CONNECT_DATE: (T.DateType(), "date"),
    f.DBZ_TIME: (T.LongType(), "micros_from_millis"),
    f.CONNECT_TIME: (T.LongType(), "micros_from_millis"),
    f.DBZ_MICRO_TIME: (T.LongType(), "long"),
    f.DBZ_NANO_TIME: (T.LongType(), "micros_from_nanos"),
    f.DBZ_TIMESTAMP: (T.TimestampNTZType(), "timestamp_from_millis"),
    f.CONNECT_TIMESTAMP: (T.TimestampNTZType(), "timestamp_from_millis"),
    f.DBZ_MICRO_TIMESTAMP: (T.TimestampNTZType(), "timestamp_from_micros"),
    f.DBZ_NANO_TIMESTAMP: (T.TimestampNTZType(), "timestamp_from_nanos"),
}


def _metadata(schema: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {META_CONNECT_TYPE: schema.get(f.SCHEMA_TYPE)}
    if schema.get(f.SCHEMA_NAME):
        meta[META_LOGICAL_TYPE] = schema[f.SCHEMA_NAME]
    if schema.get(f.SCHEMA_PARAMETERS):
        meta[META_PARAMETERS] = json.dumps(schema[f.SCHEMA_PARAMETERS], sort_keys=True)
    meta[META_OPTIONAL] = bool(schema.get(f.SCHEMA_OPTIONAL, True))
    return meta


def _decimal_plan(schema: Mapping[str, Any], meta: dict[str, Any]) -> TypePlan:
    params = schema.get(f.SCHEMA_PARAMETERS) or {}
    if f.DECIMAL_SCALE not in params:
        raise ConnectSchemaError(
            f"{f.CONNECT_DECIMAL} without a '{f.DECIMAL_SCALE}' parameter: the scale is never guessed; "
            "declare it in the schema source (e.g. 'decimal(10,2)')"
        )
    scale = int(params[f.DECIMAL_SCALE])
    precision = int(params[f.DECIMAL_PRECISION]) if f.DECIMAL_PRECISION in params else None
    if (precision is not None and precision > 38) or scale < 0:
        # wider than Spark's decimals (or a negative scale, which they do not have): exact plain text
        return TypePlan(T.StringType(), T.StringType(), {"type": "decimal_text", "scale": scale}, meta)
    target = T.DecimalType(precision if precision is not None else 38, scale)
    if scale > target.precision:
        raise ConnectSchemaError(f"decimal scale {scale} exceeds precision {target.precision}")
    codec = {"type": "decimal", "precision": target.precision, "scale": scale}
    return TypePlan(T.StringType(), target, codec, meta)


def plan_type(schema: Mapping[str, Any], *, bits_byte_order: str = "little") -> TypePlan:
    """Plan the reading and conversion of one Connect schema (recursively for struct/array/map).

    Args:
        schema: a Connect schema as JsonConverter renders it (``type``, ``name``, ``parameters``, ``fields``...).
        bits_byte_order: byte order of ``io.debezium.data.Bits`` for this connector (kept as metadata).

    Raises:
        ConnectSchemaError: unknown type, or a Decimal without ``scale``.
    """
    kind = schema.get(f.SCHEMA_TYPE)
    name = schema.get(f.SCHEMA_NAME)
    meta = _metadata(schema)
    if name == f.CONNECT_DECIMAL:
        return _decimal_plan(schema, meta)
    if name == f.DBZ_VARIABLE_SCALE_DECIMAL:
        wire = T.StructType([T.StructField(f.VSD_SCALE, T.IntegerType()), T.StructField(f.VSD_VALUE, T.StringType())])
        return TypePlan(wire, T.StringType(), {"type": "variable_scale_decimal"}, meta)
    if name == f.DBZ_ZONED_TIMESTAMP:
        return TypePlan(T.StringType(), T.TimestampType(), {"type": "zoned_timestamp"}, meta)
    if name in _INTEGRAL_LOGICAL:
        target, conversion = _INTEGRAL_LOGICAL[name]
        int_wire = kind in _INT_KINDS
        wire: T.DataType = T.IntegerType() if int_wire else T.LongType()
        return TypePlan(
            wire, target, {"type": "integral", "wire": "int" if int_wire else "long", "as": conversion}, meta
        )
    if kind in _PRIMITIVES:
        prim, codec = _PRIMITIVES[kind]
        return TypePlan(prim, prim, dict(codec), meta)
    if kind == "bytes":
        if name == f.DBZ_BITS:
            meta["cdc.bits.byte_order"] = bits_byte_order
        return TypePlan(T.StringType(), T.BinaryType(), {"type": "bytes"}, meta)
    if kind == "array":
        items = plan_type(schema.get(f.SCHEMA_ITEMS) or {}, bits_byte_order=bits_byte_order)
        return TypePlan(
            T.ArrayType(items.wire), T.ArrayType(items.spark), {"type": "array", "items": items.codec}, meta
        )
    if kind == "map":
        keys = schema.get(f.SCHEMA_KEYS) or {}
        values = plan_type(schema.get(f.SCHEMA_VALUES) or {}, bits_byte_order=bits_byte_order)
        if keys.get(f.SCHEMA_TYPE) != "string":
            # JsonConverter renders non-string-keyed maps as [[k, v], ...]: keep the JSON text.
            return TypePlan(T.StringType(), T.StringType(), {"type": "json_text"}, meta)
        return TypePlan(
            T.MapType(T.StringType(), values.wire),
            T.MapType(T.StringType(), values.spark),
            {"type": "map", "values": values.codec},
            meta,
        )
    if kind == "struct":
        return plan_struct(schema.get(f.SCHEMA_FIELDS) or [], meta=meta, bits_byte_order=bits_byte_order)
    raise ConnectSchemaError(f"unsupported Connect schema type {kind!r} (name {name!r})")


def plan_struct(
    fields_: Sequence[Mapping[str, Any]], *, meta: dict[str, Any] | None = None, bits_byte_order: str = "little"
) -> TypePlan:
    """Plan a Connect struct from its field list (see :func:`plan_type`)."""
    plans = [(fld[f.SCHEMA_FIELD], plan_type(fld, bits_byte_order=bits_byte_order)) for fld in fields_]
    return TypePlan(
        T.StructType([T.StructField(n, p.wire) for n, p in plans]),
        T.StructType([T.StructField(n, p.spark, True, p.metadata) for n, p in plans]),
        {"type": "struct", "fields": [{"name": n, "codec": p.codec} for n, p in plans]},
        meta or {},
    )


@dataclass(frozen=True)
class RowPlan:
    """The plan of a row image (the ``before``/``after`` struct): one :class:`TypePlan` per column, in order."""

    columns: tuple[tuple[str, TypePlan], ...]

    @property
    def wire(self) -> T.StructType:
        """The Spark type a JSON reader would parse ``before``/``after`` with."""
        return T.StructType([T.StructField(n, p.wire) for n, p in self.columns])

    @property
    def spark(self) -> T.StructType:
        """The decoded row type, with Connect/Debezium type names as field metadata."""
        return T.StructType([T.StructField(n, p.spark, True, p.metadata) for n, p in self.columns])

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in order."""
        return tuple(n for n, _ in self.columns)

    def codecs(self, *, placeholders: bool) -> list[dict[str, Any]]:
        """The decoder's columns: ``name`` and ``codec``.

        Args:
            placeholders: the connector writes ``__debezium_unavailable_value`` for unchanged TOASTed values
                (PostgreSQL): the text, bytes and decimal columns (and arrays of them) of the image are read as
                "keep the stored value" when they hold it.
        """
        return [
            {"name": n, "codec": {**p.codec, "placeholder": True} if placeholders else p.codec} for n, p in self.columns
        ]


def plan_row(fields_: Sequence[Mapping[str, Any]], *, bits_byte_order: str = "little") -> RowPlan:
    """Plan a row image from the Connect fields of its ``Value`` struct.

    Raises:
        ConnectSchemaError: see :func:`plan_type`.
    """
    return RowPlan(tuple((fld[f.SCHEMA_FIELD], plan_type(fld, bits_byte_order=bits_byte_order)) for fld in fields_))


def merge_fields(versions: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """Union the field lists of several schema versions (oldest first) by name; the latest definition wins."""
    merged: dict[str, Mapping[str, Any]] = {}
    for fields_ in versions:
        for fld in fields_:
            merged[fld[f.SCHEMA_FIELD]] = fld
    return list(merged.values())
