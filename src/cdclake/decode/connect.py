"""Kafka Connect schema -> Spark: the ``from_json`` ("wire") type and a native conversion to the decoded type.

Every conversion is a native Spark expression (no Python UDF). Values that cannot be represented (a value too wide
for its ``decimal(p<=38,s)`` column, invalid base64) are flagged per row and sent to dead letters, never guessed;
string-typed decimals (precision > 38, VariableScaleDecimal) are exact at any width.
See ``docs/decoding.md`` for the full mapping table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.exceptions import ConnectSchemaError

logger = logging.getLogger(__name__)

#: Struct-field metadata keys carried on the decoded Spark schema (for the Iceberg schema and its evolution).
META_CONNECT_TYPE = "cdc.connect.type"
META_LOGICAL_TYPE = "cdc.logical.type"
META_PARAMETERS = "cdc.parameters"
META_OPTIONAL = "cdc.optional"

_TWO_POW_64 = "18446744073709551616"
_MAX_DECIMAL_BYTES = 16

Converter = Callable[[Column], Column]


def _identity(column: Column) -> Column:
    return column


@dataclass(frozen=True)
class TypePlan:
    """How one Connect schema is parsed and converted.

    Attributes:
        wire: the Spark type ``from_json`` parses the JSON value with.
        spark: the decoded Spark type.
        convert: wire column -> decoded column.
        invalid: wire column -> boolean column, true when the value cannot be represented (row is dead-lettered).
        placeholder: wire column -> boolean column, true when the value is ``__debezium_unavailable_value``.
        metadata: struct-field metadata (Connect type, logical name, parameters).
    """

    wire: T.DataType
    spark: T.DataType
    convert: Converter = _identity
    invalid: Converter | None = None
    placeholder: Converter | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


# -- pure expression helpers (also used by tests) -----------------------------------------------------------------


def unscaled_long_from_base64(column: Column) -> Column:
    """base64 big-endian two's-complement (<= 8 bytes) -> ``long``; ``null`` if wider or invalid.

    One ``conv`` of the sign-extended hex: about ten times cheaper than the 16-byte path, and exact.
    """
    raw = F.try_to_binary(column, F.lit("base64"))
    hexed = F.hex(raw)
    fill = F.when(F.substring(hexed, 1, 1) >= F.lit("8"), F.lit("F")).otherwise(F.lit("0"))
    return F.when(F.length(raw) <= 8, F.conv(F.lpad(hexed, 16, fill), 16, -10).cast("long"))


def unscaled_from_base64(column: Column) -> Column:
    """base64 big-endian two's-complement (<= 16 bytes) -> ``decimal(38,0)``; ``null`` if too wide or invalid."""
    raw = F.try_to_binary(column, F.lit("base64"))
    hexed = F.hex(raw)
    negative = F.substring(hexed, 1, 1) >= F.lit("8")
    padded = F.lpad(hexed, 32, F.when(negative, F.lit("F")).otherwise(F.lit("0")))
    high = F.conv(F.substring(padded, 1, 16), 16, -10).try_cast("decimal(20,0)")
    low = F.conv(F.substring(padded, 17, 16), 16, 10).try_cast("decimal(20,0)")
    value = F.try_add(F.try_multiply(high, F.lit(_TWO_POW_64).cast("decimal(20,0)")), low).try_cast("decimal(38,0)")
    return F.when(F.length(raw) <= _MAX_DECIMAL_BYTES, value)


_LIMB_BITS = 28  # hex chunks of 7 digits: limb (< 10**9) * 2**28 + carry stays far below 2**63
_LIMB_BASE = 10**9


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """Evaluate ``value`` once and bind it for ``body`` (keeps large expressions from being duplicated)."""
    return F.get(F.transform(F.array(value), body), 0)


def _base64_magnitude_limbs(hexed: Column) -> Column:
    """Hex of a big-endian two's-complement value -> ``struct<negative, digits>`` of its magnitude (exact)."""
    negative = F.substring(hexed, 1, 1) >= F.lit("8")
    magnitude_hex = F.when(negative, F.translate(hexed, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(hexed)
    chunk = _LIMB_BITS // 4
    n_chunks = F.greatest(F.ceil(F.length(hexed) / F.lit(chunk)), F.lit(1)).cast("int")
    padded = F.lpad(magnitude_hex, n_chunks * F.lit(chunk), F.lit("0"))
    chunks = F.transform(
        F.sequence(F.lit(0), n_chunks - 1),
        lambda i: (
            F.conv(F.substring(padded, i * F.lit(chunk) + 1, chunk), 16, 10).cast("long")
            + F.when(negative & (i == n_chunks - 1), F.lit(1)).otherwise(F.lit(0)).cast("long")
        ),
    )

    def step(limbs: Column, value: Column) -> Column:  # limbs little-endian: limbs * 2**28 + value
        start = F.struct(F.array().cast("array<bigint>").alias("out"), value.alias("carry"))

        def mul_add(state: Column, limb: Column) -> Column:
            return _let(
                limb * F.lit(1 << _LIMB_BITS) + state["carry"],
                lambda total: F.struct(
                    F.array_append(state["out"], total % F.lit(_LIMB_BASE)).alias("out"),
                    floor_div(total, _LIMB_BASE).alias("carry"),
                ),
            )

        return F.aggregate(
            limbs,
            start,
            mul_add,
            lambda st: F.when(st["carry"] > 0, F.array_append(st["out"], st["carry"])).otherwise(st["out"]),
        )

    def render(limbs: Column) -> Column:  # big-endian limbs -> digits
        rest = F.transform(
            F.slice(limbs, 2, F.greatest(F.size(limbs) - 1, F.lit(1))), lambda x: F.lpad(x.cast("string"), 9, "0")
        )
        text = F.concat(F.get(limbs, 0).cast("string"), F.array_join(rest, ""))
        return F.regexp_replace(text, "^0+(?=[0-9])", "")

    digits = _let(F.reverse(F.aggregate(chunks, F.array(F.lit(0).cast("long")), step)), render)
    return F.struct(negative.alias("negative"), digits.alias("digits"))


def unscaled_digits_from_base64(column: Column) -> Column:
    """base64 big-endian two's-complement of ANY width -> ``struct<negative boolean, digits string>`` (exact).

    Native and exact for arbitrarily wide values (used where ``decimal(38,0)`` cannot hold the unscaled value):
    the magnitude (for negatives: bitwise complement + 1) is folded 28 bits at a time into an array of base-10**9
    limbs with ``aggregate``; the limbs are then rendered as decimal digits. ``null`` when the input is null, empty
    or not base64.
    """
    return _let(
        F.hex(F.try_to_binary(column, F.lit("base64"))), lambda h: F.when(F.length(h) > 0, _base64_magnitude_limbs(h))
    )


def wide_decimal_string(column: Column, scale: Column) -> Column:
    """base64 unscaled value of any width + scale -> exact plain decimal string (fast path when it fits 16 bytes)."""

    def slow(wide: Column) -> Column:
        sign = F.when(wide["negative"], F.lit("-")).otherwise(F.lit(""))
        return F.when(wide.isNotNull() & scale.isNotNull(), _plain_from_digits(sign, wide["digits"], scale))

    fast = plain_decimal_string(unscaled_from_base64(column), scale)
    return F.coalesce(fast, _let(unscaled_digits_from_base64(column), slow))


def scaled_decimal(unscaled: Column, precision: int, scale: int) -> Column | None:
    """``unscaled * 10**-scale`` as ``decimal(precision, scale)`` by exact decimal arithmetic; ``null`` if too wide.

    Exact whenever ``precision + scale <= 37`` (the product ``decimal(precision,0) * decimal(scale,scale)`` then
    needs no precision loss); returns ``None`` otherwise so the caller falls back to the string rendering.
    """
    if scale < 0 or precision + scale > 37:
        return None
    fitted = unscaled.try_cast(T.DecimalType(precision, 0))
    if scale == 0:
        return fitted
    factor = F.lit("0." + "0" * (scale - 1) + "1").cast(T.DecimalType(scale, scale))
    return (fitted * factor).try_cast(T.DecimalType(precision, scale))


def plain_decimal_string(unscaled: Column, scale: Column) -> Column:
    """Render ``unscaled * 10**-scale`` exactly as a plain decimal string (no exponent)."""
    digits = F.regexp_replace(unscaled.cast("string"), "^-", "")
    sign = F.when(unscaled < 0, F.lit("-")).otherwise(F.lit(""))
    return F.when(unscaled.isNull() | scale.isNull(), F.lit(None).cast("string")).otherwise(
        _plain_from_digits(sign, digits, scale)
    )


def _plain_from_digits(sign: Column, digits: Column, scale: Column) -> Column:
    """``sign`` ("" or "-") + unsigned ``digits`` scaled by ``10**-scale`` -> plain decimal string."""
    zero = digits == F.lit("0")
    padded = F.lpad(digits, F.greatest(F.length(digits), scale + 1), F.lit("0"))
    split = F.length(padded) - scale
    fractional = F.concat(sign, F.substring(padded, F.lit(1), split), F.lit("."), F.substring(padded, split + 1, scale))
    integral = F.concat(sign, digits, F.when(zero, F.lit("")).otherwise(F.repeat(F.lit("0"), -scale)))
    return F.when(scale > 0, fractional).otherwise(integral)


def floor_div(column: Column, divisor: int) -> Column:
    """Exact floor division of a long column (no double rounding), as ``long``."""
    as_long = column.cast("long")
    return ((as_long - F.pmod(as_long, F.lit(divisor))).cast("decimal(20,0)") / F.lit(divisor)).cast("long")


def micros_to_timestamp_ntz(micros: Column) -> Column:
    """Microseconds since the epoch -> ``timestamp_ntz`` (wall clock; relies on the session zone being UTC)."""
    return F.timestamp_micros(micros).cast("timestamp_ntz")


# -- plans --------------------------------------------------------------------------------------------------------

_PRIMITIVES: dict[str, T.DataType] = {
    "int8": T.IntegerType(),
    "int16": T.IntegerType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "float32": T.FloatType(),
    "float64": T.DoubleType(),
    # JsonConverter's JSON schema spells the Connect FLOAT32/FLOAT64 types "float"/"double".
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
}


def _metadata(schema: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {META_CONNECT_TYPE: schema.get(f.SCHEMA_TYPE)}
    if schema.get(f.SCHEMA_NAME):
        meta[META_LOGICAL_TYPE] = schema[f.SCHEMA_NAME]
    if schema.get(f.SCHEMA_PARAMETERS):
        meta[META_PARAMETERS] = json.dumps(schema[f.SCHEMA_PARAMETERS], sort_keys=True)
    meta[META_OPTIONAL] = bool(schema.get(f.SCHEMA_OPTIONAL, True))
    return meta


def _not_null_but(converted: Converter) -> Converter:
    # the conversion on the left: it is then always evaluated, so codegen shares it with the output column
    return lambda c: converted(c).isNull() & c.isNotNull()


def _decimal_plan(schema: Mapping[str, Any], meta: dict[str, Any]) -> TypePlan:
    params = schema.get(f.SCHEMA_PARAMETERS) or {}
    if f.DECIMAL_SCALE not in params:
        raise ConnectSchemaError(
            f"{f.CONNECT_DECIMAL} without a '{f.DECIMAL_SCALE}' parameter: the scale is never guessed; "
            "declare it in the schema source (e.g. 'decimal(10,2)')"
        )
    scale = int(params[f.DECIMAL_SCALE])
    precision = int(params[f.DECIMAL_PRECISION]) if f.DECIMAL_PRECISION in params else None
    text: Converter = lambda c: plain_decimal_string(unscaled_from_base64(c), F.lit(scale))  # noqa: E731
    if precision is not None and precision > 38:
        target: T.DataType = T.StringType()
        convert = lambda c: wide_decimal_string(c, F.lit(scale))  # noqa: E731
    else:
        target = T.DecimalType(precision if precision is not None else 38, scale)
        if scale > target.precision:
            raise ConnectSchemaError(f"decimal scale {scale} exceeds precision {target.precision}")
        convert = _fixed_decimal(target, text)
    return TypePlan(
        T.StringType(),
        target,
        convert,
        _not_null_but(convert),
        lambda c: c == F.lit(f.UNAVAILABLE_VALUE_BASE64),
        meta,
    )


def _fixed_decimal(target: T.DecimalType, text: Converter) -> Converter:
    """base64 unscaled value -> ``decimal(p<=38, s)``: exact arithmetic on a long when the value fits 8 bytes
    (every value of precision <= 18; one ``conv``, no string rendering), else on ``decimal(38,0)`` where that is
    exact, else through the plain decimal string."""
    precision, scale = target.precision, target.scale

    def small(c: Column) -> Column | None:
        scaled = scaled_decimal(unscaled_long_from_base64(c), min(precision, 19), scale)
        return None if scaled is None else scaled.try_cast(target)

    def wide(c: Column) -> Column:
        scaled = scaled_decimal(unscaled_from_base64(c), precision, scale)
        return scaled if scaled is not None else text(c).try_cast(target)

    def convert(c: Column) -> Column:
        fast = small(c)
        if fast is None:
            return wide(c)
        return fast if precision <= 18 else F.coalesce(fast, wide(c))

    return convert


def _vsd_plan(meta: dict[str, Any]) -> TypePlan:
    wire = T.StructType([T.StructField(f.VSD_SCALE, T.IntegerType()), T.StructField(f.VSD_VALUE, T.StringType())])

    def convert(c: Column) -> Column:
        return wide_decimal_string(c[f.VSD_VALUE], c[f.VSD_SCALE])

    return TypePlan(wire, T.StringType(), convert, _not_null_but(convert), None, meta)


_LOGICAL: dict[str, Callable[[], tuple[T.DataType, Converter]]] = {
    f.DBZ_DATE: lambda: (T.DateType(), lambda c: F.date_from_unix_date(c.cast("int"))),
    f.CONNECT_DATE: lambda: (T.DateType(), lambda c: F.date_from_unix_date(c.cast("int"))),
    f.DBZ_TIME: lambda: (T.LongType(), lambda c: c.cast("long") * F.lit(1000)),
    f.CONNECT_TIME: lambda: (T.LongType(), lambda c: c.cast("long") * F.lit(1000)),
    f.DBZ_MICRO_TIME: lambda: (T.LongType(), lambda c: c.cast("long")),
    f.DBZ_NANO_TIME: lambda: (T.LongType(), lambda c: floor_div(c, 1000)),
    f.DBZ_TIMESTAMP: lambda: (T.TimestampNTZType(), lambda c: micros_to_timestamp_ntz(c.cast("long") * F.lit(1000))),
    f.CONNECT_TIMESTAMP: lambda: (
        T.TimestampNTZType(),
        lambda c: micros_to_timestamp_ntz(c.cast("long") * F.lit(1000)),
    ),
    f.DBZ_MICRO_TIMESTAMP: lambda: (T.TimestampNTZType(), lambda c: micros_to_timestamp_ntz(c.cast("long"))),
    f.DBZ_NANO_TIMESTAMP: lambda: (T.TimestampNTZType(), lambda c: micros_to_timestamp_ntz(floor_div(c, 1000))),
    f.DBZ_ZONED_TIMESTAMP: lambda: (T.TimestampType(), lambda c: c.try_cast("timestamp")),
}


def plan_type(schema: Mapping[str, Any], *, bits_byte_order: str = "little") -> TypePlan:
    """Plan the parse and conversion of one Connect schema (recursively for struct/array/map).

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
        return _vsd_plan(meta)
    if name in _LOGICAL:
        target, convert = _LOGICAL[name]()
        wire = T.StringType() if name == f.DBZ_ZONED_TIMESTAMP else _PRIMITIVES.get(kind, T.LongType())
        return TypePlan(wire, target, convert, _not_null_but(convert), None, meta)
    if kind in _PRIMITIVES:
        prim = _PRIMITIVES[kind]
        placeholder = (lambda c: c == F.lit(f.UNAVAILABLE_VALUE)) if kind == "string" else None
        return TypePlan(prim, prim, _identity, None, placeholder, meta)
    if kind == "bytes":
        if name == f.DBZ_BITS:
            meta["cdc.bits.byte_order"] = bits_byte_order

        def to_binary(c: Column) -> Column:
            return F.try_to_binary(c, F.lit("base64"))

        return TypePlan(
            T.StringType(),
            T.BinaryType(),
            to_binary,
            _not_null_but(to_binary),
            lambda c: c == F.lit(f.UNAVAILABLE_VALUE_BASE64),
            meta,
        )
    if kind == "array":
        items = plan_type(schema.get(f.SCHEMA_ITEMS) or {}, bits_byte_order=bits_byte_order)
        item_invalid = items.invalid

        def convert_array(c: Column) -> Column:
            return F.transform(c, items.convert) if items.convert is not _identity else c

        invalid = (lambda c: F.exists(c, item_invalid)) if item_invalid else None  # type: ignore[arg-type]
        placeholder = (lambda c: F.get(c, 0) == F.lit(f.UNAVAILABLE_VALUE)) if items.wire == T.StringType() else None
        return TypePlan(T.ArrayType(items.wire), T.ArrayType(items.spark), convert_array, invalid, placeholder, meta)
    if kind == "map":
        keys = schema.get(f.SCHEMA_KEYS) or {}
        values = plan_type(schema.get(f.SCHEMA_VALUES) or {}, bits_byte_order=bits_byte_order)
        if keys.get(f.SCHEMA_TYPE) != "string":
            # JsonConverter renders non-string-keyed maps as [[k, v], ...]: keep the JSON text.
            return TypePlan(T.StringType(), T.StringType(), _identity, None, None, meta)
        return TypePlan(
            T.MapType(T.StringType(), values.wire),
            T.MapType(T.StringType(), values.spark),
            lambda c: F.transform_values(c, lambda _k, v: values.convert(v)),
            None,
            None,
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
    wire = T.StructType([T.StructField(n, p.wire) for n, p in plans])
    spark = T.StructType([T.StructField(n, p.spark, True, p.metadata) for n, p in plans])

    def convert(c: Column) -> Column:
        return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*[p.convert(c[n]).alias(n) for n, p in plans]))

    checks = [(n, p.invalid) for n, p in plans if p.invalid is not None]

    def invalid(c: Column) -> Column:
        out = F.lit(False)
        for n, check in checks:
            out = out | F.coalesce(check(c[n]), F.lit(False))
        return out

    return TypePlan(wire, spark, convert, invalid if checks else None, None, meta or {})


@dataclass(frozen=True)
class RowPlan:
    """The plan of a row image (the ``before``/``after`` struct): one :class:`TypePlan` per column, in order."""

    columns: tuple[tuple[str, TypePlan], ...]

    @property
    def wire(self) -> T.StructType:
        """The Spark type ``from_json`` parses ``before``/``after`` with."""
        return T.StructType([T.StructField(n, p.wire) for n, p in self.columns])

    @property
    def spark(self) -> T.StructType:
        """The decoded row type, with Connect/Debezium type names as field metadata."""
        return T.StructType([T.StructField(n, p.spark, True, p.metadata) for n, p in self.columns])

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in order."""
        return tuple(n for n, _ in self.columns)


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
