"""Canonical renderings: a value read from the source database and the same value read from the lake render alike."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
import zoneinfo
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyiceberg import types as it

from cdclake.reconcile.rows import (
    ANY,
    ColumnType,
    RowSet,
    ValueKind,
    column_type_from_iceberg,
    combine_hashes,
    diff_row_sets,
    render_key,
    render_row,
    render_value,
    row_hash,
)

UTC = zoneinfo.ZoneInfo("UTC")
DECIMAL_12_2 = ColumnType(ValueKind.DECIMAL, scale=2)
FLOAT32 = ColumnType(ValueKind.FLOAT32)
TIMESTAMPTZ = ColumnType(ValueKind.TIMESTAMPTZ)


# (what psycopg / PyMySQL return, what pyarrow's to_pylist returns, the lake column's type)
SAME_VALUE: list[tuple[str, Any, Any, ColumnType, Any]] = [
    ("numeric(12,2)", Decimal("12.50"), Decimal("12.50"), DECIMAL_12_2, "12.50"),
    ("numeric written without its scale", Decimal("12.5"), Decimal("12.50"), DECIMAL_12_2, "12.50"),
    ("negative zero", Decimal("-0.00"), Decimal("0.00"), DECIMAL_12_2, "0.00"),
    ("int under a decimal column", 7, Decimal("7.00"), DECIMAL_12_2, "7.00"),
    (
        "numeric beyond 28 digits",
        Decimal("1234567890123456789012345678901234567890.0123456789"),
        Decimal("1234567890123456789012345678901234567890.0123456789"),
        ColumnType(ValueKind.DECIMAL, scale=10),
        "1234567890123456789012345678901234567890.0123456789",
    ),
    ("variable-scale numeric", Decimal("1E+2"), Decimal("100.000"), ANY, "100"),
    (
        "timestamptz in another zone",
        dt.datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
        dt.datetime(2024, 2, 29, 7, 44, 15, 123456, tzinfo=UTC),
        TIMESTAMPTZ,
        "2024-02-29T07:44:15.123456Z",
    ),
    (
        "MariaDB TIMESTAMP, naive in a UTC session",
        dt.datetime(2030, 1, 1, 0, 0, 0),
        dt.datetime(2030, 1, 1, tzinfo=UTC),
        TIMESTAMPTZ,
        "2030-01-01T00:00:00.000000Z",
    ),
    (
        "timestamp without time zone",
        dt.datetime(1900, 1, 1, 0, 0, 0, 5),
        dt.datetime(1900, 1, 1, 0, 0, 0, 5),
        ColumnType(ValueKind.TIMESTAMP),
        "1900-01-01T00:00:00.000005",
    ),
    ("date", dt.date(1970, 1, 1), dt.date(1970, 1, 1), ColumnType(ValueKind.DATE), "1970-01-01"),
    (
        "PyMySQL TIME is a timedelta",
        dt.timedelta(hours=23, minutes=59, seconds=59, microseconds=999999),
        dt.time(23, 59, 59, 999999),
        ColumnType(ValueKind.TIME),
        "23:59:59.999999",
    ),
    ("real 0.1 read back from float32", 0.1, float(np.float32(0.1)), FLOAT32, "0.1"),
    ("double", 0.1, 0.1, ColumnType(ValueKind.FLOAT64), "0.1"),
    ("NaN", float("nan"), float("nan"), ColumnType(ValueKind.FLOAT64), "NaN"),
    ("-Infinity", float("-inf"), float("-inf"), FLOAT32, "-Infinity"),
    (
        "jsonb (dict) vs Debezium Json (text)",
        {"b": {"c": None}, "a": [1, 2]},
        '{"a": [1, 2], "b": {"c": null}}',
        ColumnType(ValueKind.JSON),
        '{"a":[1,2],"b":{"c":null}}',
    ),
    ("MariaDB JSON text", '{"a": [1, 2]}', '{"a":[1,2]}', ColumnType(ValueKind.JSON), '{"a":[1,2]}'),
    ("bytea", b"\x00\xff\x10", memoryview(b"\x00\xff\x10"), ColumnType(ValueKind.BINARY), "00ff10"),
    ("boolean", True, True, ColumnType(ValueKind.BOOLEAN), "true"),
    ("TINYINT(1) under a boolean column", 0, False, ColumnType(ValueKind.BOOLEAN), "false"),
    (
        "uuid",
        uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
        ColumnType(ValueKind.UUID),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    ),
    ("bigint", 9223372036854775807, 9223372036854775807, ColumnType(ValueKind.INTEGER), "9223372036854775807"),
    ("char(2)", "EU", "EU", ColumnType(ValueKind.STRING), "EU"),
    (
        "integer[] with a NULL",
        [1, None, 3],
        [1, None, 3],
        ColumnType(ValueKind.LIST, element=ColumnType(ValueKind.INTEGER)),
        ["1", None, "3"],
    ),
]


@pytest.mark.parametrize(
    ("db_value", "lake_value", "column", "expected"),
    [case[1:] for case in SAME_VALUE],
    ids=[case[0] for case in SAME_VALUE],
)
def test_db_and_lake_values_render_identically(
    db_value: Any, lake_value: Any, column: ColumnType, expected: Any
) -> None:
    assert render_value(db_value, column) == expected
    assert render_value(lake_value, column) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (Decimal("1.2300"), "1.23"),  # no scale known: normalised
        (Decimal("1E-7"), "0.0000001"),  # never an exponent
        (Decimal("NaN"), "NaN"),
        (1.5, "1.5"),
        (float("inf"), "Infinity"),
        ("", ""),
        (dt.time(12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), "10:00:00.000000Z"),
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), "-838:59:59.000000"),
        ({"z": 1, "a": dt.date(2024, 1, 2)}, '{"a":"2024-01-02","z":1}'),
        ((1, "x"), ["1", "x"]),
    ],
)
def test_render_by_python_type(value: Any, expected: Any) -> None:
    assert render_value(value) == expected


def test_null_and_the_text_null_are_different_rows() -> None:
    assert render_row([1, None]) == '["1",null]'
    assert row_hash(render_row([1, None])) != row_hash(render_row([1, "None"]))
    assert row_hash(render_row([1, None])) != row_hash(render_row([1, ""]))


def test_render_row_checks_the_column_count() -> None:
    with pytest.raises(ValueError, match="2 values but 1 column types"):
        render_row([1, 2], [ANY])


@pytest.mark.parametrize(
    ("iceberg_type", "doc", "expected"),
    [
        (it.LongType(), None, ColumnType(ValueKind.INTEGER)),
        (it.DecimalType(12, 2), None, ColumnType(ValueKind.DECIMAL, scale=2)),
        (it.FloatType(), None, ColumnType(ValueKind.FLOAT32)),
        (it.StringType(), "io.debezium.data.Json", ColumnType(ValueKind.JSON)),
        (it.StringType(), "io.debezium.time.ZonedTime", ColumnType(ValueKind.STRING)),
        (it.TimestamptzType(), "io.debezium.time.ZonedTimestamp", ColumnType(ValueKind.TIMESTAMPTZ)),
        (it.TimestampType(), None, ColumnType(ValueKind.TIMESTAMP)),
        (
            it.ListType(element_id=9, element_type=it.IntegerType()),
            None,
            ColumnType(ValueKind.LIST, element=ColumnType(ValueKind.INTEGER)),
        ),
    ],
)
def test_column_type_from_iceberg(iceberg_type: Any, doc: str | None, expected: ColumnType) -> None:
    assert column_type_from_iceberg(iceberg_type, doc) == expected


# --- checksums and diffs ------------------------------------------------------------------------

ROWS = [(1, "ann", Decimal("1.50")), (2, "bob", None), (3, "cy", Decimal("0.00"))]
TYPES = [ColumnType(ValueKind.INTEGER), ColumnType(ValueKind.STRING), DECIMAL_12_2]


def _row_set(rows: list[tuple[Any, ...]]) -> RowSet:
    out = RowSet()
    for row in rows:
        out.add(render_key([row[0]], TYPES[:1]), row, TYPES)
    return out


def test_checksum_does_not_depend_on_row_order() -> None:
    assert _row_set(ROWS).checksum == _row_set(list(reversed(ROWS))).checksum
    assert _row_set(ROWS).checksum != _row_set(ROWS[:2]).checksum
    assert combine_hashes([]) == "0" * 32


def test_diff_names_missing_extra_different_and_duplicate_keys() -> None:
    source = _row_set([*ROWS, (10, "dee", None)])
    lake = _row_set(
        [(1, "ann", Decimal("1.5")), (2, "bob", Decimal("2.00")), (3, "cy", None), (3, "cy", None), (4, "x", None)]
    )
    diff = diff_row_sets(source, lake)
    assert diff.missing == (("10",),)
    assert diff.extra == (("4",),)
    assert diff.different == (("2",), ("3",))  # numeric order, and 1.5 == 1.50 at scale 2
    assert diff.duplicate == (("3",),)
    assert lake.count == 5
    assert not diff.empty
    assert diff_row_sets(_row_set(ROWS), _row_set(list(reversed(ROWS)))).empty


def test_keys_sort_numerically_then_as_text() -> None:
    source = _row_set([(k, "v", None) for k in (10, 9, 100, -1)])
    assert diff_row_sets(source, RowSet()).missing == (("-1",), ("9",), ("10",), ("100",))


# --- properties ---------------------------------------------------------------------------------


@given(st.datetimes(timezones=st.timezones(), allow_imaginary=False))
def test_property_an_instant_renders_the_same_in_any_zone(value: dt.datetime) -> None:
    lake_value = value.astimezone(UTC)
    assert render_value(value, TIMESTAMPTZ) == render_value(lake_value, TIMESTAMPTZ)
    assert render_value(lake_value.replace(tzinfo=None), TIMESTAMPTZ) == render_value(lake_value, TIMESTAMPTZ)


@given(st.integers(min_value=0, max_value=12), st.decimals(allow_nan=False, allow_infinity=False, places=6))
def test_property_a_decimal_renders_per_its_column_scale(scale: int, value: Decimal) -> None:
    column = ColumnType(ValueKind.DECIMAL, scale=scale)
    db_value = value.quantize(Decimal(1).scaleb(-scale)) if abs(value) < 10**15 else value
    text = format(db_value, "f")
    lake_value = Decimal(text.rstrip("0").rstrip(".") if "." in text else text)  # same number, fewer zeros
    rendered = render_value(db_value, column)
    assert rendered == render_value(lake_value, column)
    assert "E" not in rendered and "e" not in rendered
    assert (len(rendered.partition(".")[2]) == scale) if scale else "." not in rendered


@given(st.floats(width=32))
def test_property_a_float32_read_back_renders_like_the_databases_text(stored: float) -> None:
    db_value = float(str(np.float32(stored)))  # what PostgreSQL prints for a real and psycopg parses
    assert render_value(db_value, FLOAT32) == render_value(stored, FLOAT32)
    if not math.isnan(stored):
        assert float(render_value(stored, FLOAT32).replace("Infinity", "inf")) == pytest.approx(stored, rel=1e-6)


@given(
    st.lists(
        st.tuples(st.integers(), st.one_of(st.none(), st.text(max_size=8), st.floats(allow_nan=False))),
        unique_by=lambda r: r[0],
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)
def test_property_checksum_is_order_independent(rows: list[tuple[Any, ...]], rng: Any) -> None:
    shuffled = list(rows)
    rng.shuffle(shuffled)
    a, b = RowSet(), RowSet()
    for row in rows:
        a.add(render_key(row[:1]), row)
    for row in shuffled:
        b.add(render_key(row[:1]), row)
    assert a.checksum == b.checksum
    assert diff_row_sets(a, b).empty


def test_rendered_rows_are_json() -> None:
    text = render_row([Decimal("1.10"), dt.date(2024, 1, 1), b"\x01", [1, 2]], [DECIMAL_12_2, ANY, ANY, ANY])
    assert json.loads(text) == ["1.10", "2024-01-01", "01", ["1", "2"]]
