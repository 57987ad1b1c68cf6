"""Canonical row renderings and order-independent checksums (pure: no I/O).

The same logical value must render to the same text whether it comes from the source database
(psycopg / PyMySQL Python types) or from the lake (pyarrow values turned into Python). The lake's
Iceberg type of the column is the *target type* both sides are rendered as (:class:`ColumnType`):

======================  ==========================================================================
value                   rendering
======================  ==========================================================================
``None``                JSON ``null``
``bool``                ``"true"`` / ``"false"`` (also an int under a ``boolean`` column)
``int``                 decimal digits (a ``decimal`` column renders it as a decimal, see below)
``Decimal``             plain notation, no exponent; quantized to the column's scale when known,
                        otherwise normalised (no trailing zeros); ``-0`` is ``0``
``float``               ``repr`` (shortest round-trip); ``NaN``, ``Infinity``, ``-Infinity``; a
                        ``float`` (FLOAT32) column renders the shortest text that round-trips
                        through float32, so ``0.1`` read back from a float32 equals ``0.1``
``str``                 as is; under a JSON column (Debezium ``io.debezium.data.Json``) parsed
                        and re-rendered with sorted keys
``bytes``               lower-case hex
``date``                ISO ``YYYY-MM-DD``
``time``                ``HH:MM:SS.ffffff`` (a ``timedelta``, PyMySQL's TIME, likewise)
``datetime``            naive: ``YYYY-MM-DDTHH:MM:SS.ffffff``; aware: converted to UTC, suffix
                        ``Z``; a naive value under a ``timestamptz`` column is taken as UTC
``dict``                JSON with sorted keys
``list`` / ``tuple``    a list of the elements' renderings
anything else           ``str(value)`` (UUID, inet, ...)
======================  ==========================================================================

A row renders as the compact JSON array of its values' renderings; its hash is the first 128 bits
of that text's SHA-256. A table's checksum is the sum of its rows' hashes modulo 2**128, so it does
not depend on the order in which the rows were read.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation, localcontext
from enum import StrEnum
from typing import Any

_HASH_BITS = 128
_HASH_MOD = 1 << _HASH_BITS
_JSON_LOGICAL = "io.debezium.data.Json"

RowKey = tuple[str | None, ...]
"""A row's primary-key values, rendered (:func:`render_key`), in key-column order."""


class ValueKind(StrEnum):
    """The target type a column's values are rendered as (from the lake's Iceberg type)."""

    BOOLEAN = "boolean"
    INTEGER = "integer"
    FLOAT32 = "float"
    FLOAT64 = "double"
    DECIMAL = "decimal"
    STRING = "string"
    JSON = "json"
    BINARY = "binary"
    DATE = "date"
    TIME = "time"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    UUID = "uuid"
    LIST = "list"
    OTHER = "other"


@dataclass(frozen=True)
class ColumnType:
    """How to render one column: its kind, a decimal's scale, a list's element type."""

    kind: ValueKind = ValueKind.OTHER
    scale: int | None = None
    element: ColumnType | None = None

    def __str__(self) -> str:
        if self.kind is ValueKind.DECIMAL and self.scale is not None:
            return f"decimal(scale={self.scale})"
        if self.kind is ValueKind.LIST and self.element is not None:
            return f"list<{self.element}>"
        return self.kind.value


ANY = ColumnType()
"""No type hint: render each value by its Python type alone."""


def column_type_from_iceberg(iceberg_type: Any, doc: str | None = None) -> ColumnType:
    """The :class:`ColumnType` of a pyiceberg type; ``doc`` is the field's comment (Debezium logical type)."""
    from pyiceberg import types as t

    if isinstance(iceberg_type, t.StringType) and doc and _JSON_LOGICAL in doc:
        return ColumnType(ValueKind.JSON)
    if isinstance(iceberg_type, t.DecimalType):
        return ColumnType(ValueKind.DECIMAL, scale=iceberg_type.scale)
    if isinstance(iceberg_type, t.ListType):
        return ColumnType(ValueKind.LIST, element=column_type_from_iceberg(iceberg_type.element_type))
    simple: list[tuple[type, ValueKind]] = [
        (t.BooleanType, ValueKind.BOOLEAN),
        (t.IntegerType, ValueKind.INTEGER),
        (t.LongType, ValueKind.INTEGER),
        (t.FloatType, ValueKind.FLOAT32),
        (t.DoubleType, ValueKind.FLOAT64),
        (t.StringType, ValueKind.STRING),
        (t.BinaryType, ValueKind.BINARY),
        (t.FixedType, ValueKind.BINARY),
        (t.DateType, ValueKind.DATE),
        (t.TimeType, ValueKind.TIME),
        (t.TimestamptzType, ValueKind.TIMESTAMPTZ),
        (t.TimestampType, ValueKind.TIMESTAMP),
        (t.UUIDType, ValueKind.UUID),
    ]
    for cls, kind in simple:
        if isinstance(iceberg_type, cls):
            return ColumnType(kind)
    return ANY


# --- values ------------------------------------------------------------------------------------


def _float32_text(value: float) -> str:
    """Shortest decimal text that round-trips through IEEE float32 (what a FLOAT/REAL column holds)."""
    stored = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, 10):
        text = f"{stored:.{digits}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == stored:
                return repr(float(text))
        except OverflowError:  # rounded above the float32 range
            continue
    return repr(stored)  # pragma: no cover - 9 significant digits always round-trip


def _render_float(value: float, column: ColumnType) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if column.kind is ValueKind.FLOAT32:
        try:
            return _float32_text(value)
        except OverflowError:
            return repr(value)
    if column.kind is ValueKind.DECIMAL:
        return _render_decimal(Decimal(repr(value)), column.scale)
    if column.kind is ValueKind.INTEGER and value.is_integer():
        return str(int(value))
    return repr(value)


def _render_decimal(value: Decimal, scale: int | None) -> str:
    if value.is_nan():
        return "NaN"
    if value.is_infinite():
        return "Infinity" if value > 0 else "-Infinity"
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    # exact arithmetic: enough precision for every digit (the default context rounds to 28)
    with localcontext() as ctx:
        ctx.prec = max(28, len(digits) + abs(exponent) + abs(scale or 0) + 2)
        if scale is not None:
            value = value.quantize(Decimal(1).scaleb(-scale))
        else:
            value = value.normalize()
            if value == value.to_integral_value():  # normalize() turns 100 into 1E+2
                value = value.quantize(Decimal(1))
        if value.is_zero():
            value = abs(value)
        return format(value, "f")


def _time_text(hours: int, minutes: int, seconds: int, micros: int) -> str:
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{micros:06d}"


def _render_timedelta(value: dt.timedelta, column: ColumnType) -> str:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if column.kind is ValueKind.INTEGER:
        return str(micros)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    return sign + _time_text(seconds // 3600, seconds // 60 % 60, seconds % 60, frac)


def _render_time(value: dt.time, column: ColumnType) -> str:
    offset = value.utcoffset()
    if offset is not None:  # time with time zone: shift to UTC
        moved = dt.datetime.combine(dt.date(2000, 1, 1), value.replace(tzinfo=None)) - offset
        return _time_text(moved.hour, moved.minute, moved.second, moved.microsecond) + "Z"
    if column.kind is ValueKind.INTEGER:
        return str(((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond)
    return _time_text(value.hour, value.minute, value.second, value.microsecond)


def _render_datetime(value: dt.datetime, column: ColumnType) -> str:
    if value.tzinfo is None and column.kind is ValueKind.TIMESTAMPTZ:
        value = value.replace(tzinfo=dt.UTC)
    if value.tzinfo is not None and value.utcoffset() is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    return value.isoformat(timespec="microseconds")


def _json_default(value: Any) -> Any:
    rendered = render_value(value)
    return rendered


def _render_json_text(value: str) -> str:
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return _json_dumps(parsed)


def _json_dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def render_value(value: Any, column: ColumnType = ANY) -> Any:
    """Canonical rendering of one value: a ``str``, ``None``, or a list of renderings (for lists).

    Args:
        value: a Python value as psycopg, PyMySQL or pyarrow's ``to_pylist`` returns it.
        column: the column's target type (from the lake); :data:`ANY` renders by Python type only.
    """
    kind = column.kind
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if kind is ValueKind.BOOLEAN:
            return "true" if value else "false"
        if kind is ValueKind.DECIMAL:
            return _render_decimal(Decimal(value), column.scale)
        if kind in (ValueKind.FLOAT32, ValueKind.FLOAT64):
            return _render_float(float(value), column)
        return str(value)
    if isinstance(value, float):
        return _render_float(value, column)
    if isinstance(value, Decimal):
        if kind in (ValueKind.FLOAT32, ValueKind.FLOAT64):
            return _render_float(float(value), column)
        return _render_decimal(value, column.scale if kind is ValueKind.DECIMAL else None)
    if isinstance(value, str):
        if kind is ValueKind.JSON:
            return _render_json_text(value)
        if kind is ValueKind.DECIMAL:
            try:
                return _render_decimal(Decimal(value), column.scale)
            except InvalidOperation:
                return value
        if kind is ValueKind.UUID:
            return value.lower()
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dt.datetime):
        return _render_datetime(value, column)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return _render_time(value, column)
    if isinstance(value, dt.timedelta):
        return _render_timedelta(value, column)
    if isinstance(value, Mapping):
        return _json_dumps(dict(value))
    if isinstance(value, list | tuple):
        if kind in (ValueKind.JSON, ValueKind.STRING):
            return _json_dumps(list(value))
        element = column.element or ANY
        return [render_value(v, element) for v in value]
    return str(value)


# --- rows and checksums ------------------------------------------------------------------------


def render_row(values: Sequence[Any], columns: Sequence[ColumnType] | None = None) -> str:
    """Canonical text of a row: the compact JSON array of its values' renderings.

    Raises:
        ValueError: when ``columns`` is given with a different length than ``values``.
    """
    if columns is None:
        columns = [ANY] * len(values)
    if len(columns) != len(values):
        raise ValueError(f"{len(values)} values but {len(columns)} column types")
    return json.dumps(
        [render_value(v, c) for v, c in zip(values, columns, strict=True)], ensure_ascii=False, separators=(",", ":")
    )


def render_key(values: Sequence[Any], columns: Sequence[ColumnType] | None = None) -> RowKey:
    """A row's key as a tuple of renderings, so equal keys match whichever side they were read from."""
    if columns is None:
        columns = [ANY] * len(values)
    out: list[str | None] = []
    for value, column in zip(values, columns, strict=True):
        rendered = render_value(value, column)
        out.append(rendered if rendered is None or isinstance(rendered, str) else _json_dumps(rendered))
    return tuple(out)


def row_hash(rendered: str) -> int:
    """128-bit hash of a rendered row (first 16 bytes of its SHA-256)."""
    return int.from_bytes(hashlib.sha256(rendered.encode("utf-8")).digest()[:16], "big")


def combine_hashes(hashes: Iterable[int]) -> str:
    """Order-independent checksum of row hashes: their sum modulo 2**128, as 32 hex digits."""
    total = 0
    for value in hashes:
        total = (total + value) % _HASH_MOD
    return f"{total:032x}"


@dataclass
class RowSet:
    """The rows of one table side, by key: each key's row hash (the rendered text is not kept).

    Attributes:
        hashes: key → row hash.
        duplicate_keys: keys seen more than once (a lake table that lost its key uniqueness).
    """

    hashes: dict[RowKey, int] = field(default_factory=dict)
    duplicate_keys: list[RowKey] = field(default_factory=list)

    def add(self, key: RowKey, values: Sequence[Any], columns: Sequence[ColumnType] | None = None) -> None:
        """Render ``values`` and record the row under ``key``."""
        digest = row_hash(render_row(values, columns))
        if key in self.hashes:
            self.duplicate_keys.append(key)
            digest = (self.hashes[key] + digest) % _HASH_MOD
        self.hashes[key] = digest

    @property
    def count(self) -> int:
        """Rows added (duplicates included)."""
        return len(self.hashes) + len(self.duplicate_keys)

    @property
    def checksum(self) -> str:
        """Order-independent checksum of the rows (see :func:`combine_hashes`)."""
        return combine_hashes(self.hashes.values())


@dataclass(frozen=True)
class RowSetDiff:
    """Keys that differ between the source's and the lake's rows of one table, each list sorted.

    Attributes:
        missing: keys in the source but not in the lake.
        extra: keys in the lake but not in the source.
        different: keys in both whose rows render differently.
        duplicate: keys found more than once in the lake.
    """

    missing: tuple[RowKey, ...] = ()
    extra: tuple[RowKey, ...] = ()
    different: tuple[RowKey, ...] = ()
    duplicate: tuple[RowKey, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.missing or self.extra or self.different or self.duplicate)


def _key_order(key: RowKey) -> tuple[tuple[int, Decimal, str], ...]:
    parts = []
    for value in key:
        if value is None:
            parts.append((0, Decimal(0), ""))
            continue
        try:
            number = Decimal(value)
        except InvalidOperation:
            number = None
        if number is not None and number.is_finite():
            parts.append((1, number, value))
        else:
            parts.append((2, Decimal(0), value))
    return tuple(parts)


def _sort_keys(keys: Iterable[RowKey]) -> tuple[RowKey, ...]:
    """Keys sorted numerically where they are numbers, else as text."""
    return tuple(sorted(keys, key=_key_order))


def diff_row_sets(source: RowSet, lake: RowSet) -> RowSetDiff:
    """Compare two :class:`RowSet` by key (pure)."""
    src, lk = source.hashes, lake.hashes
    return RowSetDiff(
        missing=_sort_keys(k for k in src if k not in lk),
        extra=_sort_keys(k for k in lk if k not in src),
        different=_sort_keys(k for k, h in src.items() if k in lk and lk[k] != h),
        duplicate=_sort_keys(set(lake.duplicate_keys)),
    )
