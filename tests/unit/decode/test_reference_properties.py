"""Property tests: pure-Python reference converters, and the envelope decoder agreeing with them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, localcontext

import pytest
from decode_helpers import decode_values
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from cdclake.decode import reference as ref

#: Unscaled values of 16 bytes and less (|unscaled| < 2**127), and far wider ones (text decimals are exact at any
#: width).
INT127 = st.integers(min_value=-(2**127), max_value=2**127 - 1)
WIDE = st.integers(min_value=-(10**80), max_value=10**80)


@given(st.integers(min_value=-(2**300), max_value=2**300))
def test_unscaled_round_trip(n: int) -> None:
    assert ref.decode_unscaled(ref.encode_unscaled(n)) == n


@given(st.integers(min_value=-(10**60), max_value=10**60), st.integers(min_value=-10, max_value=40))
def test_decimal_string_is_exact(n: int, scale: int) -> None:
    with localcontext() as ctx:
        ctx.prec = 200
        assert Decimal(ref.decimal_string(n, scale)) == Decimal(n).scaleb(-scale)


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_temporal_references(n: int) -> None:
    micros = n // 1000
    assert ref.timestamp_ntz_from_nanos(n) == ref.timestamp_ntz_from_micros(n // 1000)
    assert ref.time_micros_from_nanos(n) == n // 1000
    if abs(micros) < 2**52:
        assert ref.timestamp_ntz_from_micros(micros).replace(tzinfo=UTC).timestamp() == pytest.approx(micros / 1e6)


_TEMPORAL_FIELDS = [
    {"field": "id", "type": "int32"},
    {"field": "vsd", "type": "struct", "name": "io.debezium.data.VariableScaleDecimal",
     "fields": [{"field": "scale", "type": "int32"}, {"field": "value", "type": "bytes"}]},
    {"field": "nts", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
    {"field": "uts", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "nt", "type": "int64", "name": "io.debezium.time.NanoTime"},
    {"field": "date", "type": "int32", "name": "io.debezium.time.Date"},
    {"field": "ms", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "z", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
]  # fmt: skip

#: Zoned timestamps as Debezium writes them: ISO-8601 with an offset or Z, 0 to 9 fraction digits.
_ZONED = st.builds(
    lambda moment, offset_minutes, digits, nanos: _iso(moment, offset_minutes, digits, nanos),
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9999, 12, 30)),
    st.integers(min_value=-18 * 60 + 1, max_value=18 * 60 - 1),
    st.integers(min_value=0, max_value=9),
    st.integers(min_value=0, max_value=999_999_999),
)


def _iso(moment: datetime, offset_minutes: int, digits: int, nanos: int) -> str:
    text = moment.replace(microsecond=0, tzinfo=timezone(timedelta(minutes=offset_minutes))).isoformat()
    base, offset = text[:-6], text[-6:]  # isoformat ends with +hh:mm
    fraction = "." + f"{nanos:09d}"[:digits] if digits else ""
    return base + fraction + (offset if offset_minutes else "Z")


@pytest.mark.spark
@settings(max_examples=2, deadline=None)
@given(
    st.lists(WIDE, min_size=20, max_size=20),
    st.lists(st.integers(min_value=-5, max_value=40), min_size=20, max_size=20),
    st.lists(st.integers(min_value=-(2**62), max_value=2**62), min_size=20, max_size=20),
    st.lists(_ZONED, min_size=20, max_size=20),
)
def test_decoder_agrees_with_reference(
    spark: SparkSession, unscaled: list[int], scales: list[int], longs: list[int], zoned: list[str]
) -> None:
    """One decode per hypothesis example, 26 events of every converter: the decoded rows equal the reference."""
    unscaled = [*unscaled, 0, -1, 2**127, -(2**127), 255, -128]
    scales = [*scales, 0, 3, 0, 5, -2, 1]
    longs = [*longs, 0, -1, -999, 1000, -1000, 1]
    zoned = [*zoned, "2024-02-29T23:59:59.123456789+05:30", "1970-01-01T00:00:00Z", "0002-01-01T00:00:00Z",
             "9999-12-31T23:59:59.999999999Z", "2024-01-01T00:00:00.1-00:30", "2000-02-29T12:00:00+14:00"]  # fmt: skip
    days = [x % 1_400_000 - 700_000 for x in longs]
    rows = [
        {"id": i, "vsd": {"scale": s, "value": ref.encode_unscaled(u)}, "nts": n, "uts": n // 1000, "nt": n,
         "date": d, "ms": n // 10**6, "z": z}
        for i, (u, s, n, d, z) in enumerate(zip(unscaled, scales, longs, days, zoned, strict=True))
    ]  # fmt: skip
    decoded, dead = decode_values(spark, _TEMPORAL_FIELDS, rows)
    assert dead == {}
    for i, (u, s, n, d, z) in enumerate(zip(unscaled, scales, longs, days, zoned, strict=True)):
        row = decoded[i]
        assert row["vsd"] == ref.decimal_string(u, s)
        assert row["nts"] == ref.timestamp_ntz_from_nanos(n)
        assert row["uts"] == ref.timestamp_ntz_from_micros(n // 1000)
        assert row["nt"] == ref.time_micros_from_nanos(n)
        assert row["date"] == ref.date_from_days(d)
        assert row["ms"] == ref.timestamp_ntz_from_millis(n // 10**6)
        assert row["z"].replace(tzinfo=UTC) == ref.timestamp_from_zoned(z), z


def test_zoned_reference() -> None:
    assert ref.timestamp_from_zoned("2023-11-14T23:13:20.5+02:00") == datetime(
        2023, 11, 14, 21, 13, 20, 500000, tzinfo=UTC
    )


#: (precision, scale) pairs across the decoder's decimal paths: an unscaled value of 8 bytes or less (long
#: arithmetic) and a wider one (BigInteger), precision below and above 18, and text beyond 38 digits.
_DECIMAL_TYPES = [(5, 0), (12, 2), (18, 6), (18, 0), (19, 4), (25, 10), (30, 7), (38, 0), (38, 2), (38, 20), (28, 28),
                  (39, 2), (65, 30)]  # fmt: skip


@pytest.mark.spark
@settings(max_examples=1, deadline=None)
@given(st.lists(INT127, min_size=20, max_size=20))
def test_connect_decimal_is_exact_on_every_path(spark: SparkSession, unscaled: list[int]) -> None:
    """Each (precision, scale): values that fit decode to the exact value; values too wide are dead letters.

    One event per (value, type), the other decimal columns null: a value that does not fit its column makes its
    event an ``unrepresentable_value`` dead letter, never a rounded or wrapped value.
    """
    edge = [0, -1, 1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**18 - 1, -(10**18) + 1, 10**37, -(10**38) + 1,
            10**38 - 1, 10**38, 2**127 - 1, -(2**127)]  # fmt: skip
    values = [*unscaled, *edge]
    fields = [{"field": "id", "type": "int32"}] + [
        {"field": f"c_{p}_{s}", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": str(s), "connect.decimal.precision": str(p)}}
        for p, s in _DECIMAL_TYPES
    ]  # fmt: skip
    cases = [(u, p, s) for u in values for p, s in _DECIMAL_TYPES]
    rows = [{"id": i, f"c_{p}_{s}": ref.encode_unscaled(u)} for i, (u, p, s) in enumerate(cases)]
    decoded, dead = decode_values(spark, fields, rows)
    problems = []
    with localcontext() as ctx:
        ctx.prec = 100
        for i, (u, p, s) in enumerate(cases):
            fits = abs(u) < 10**p
            value = decoded[i][f"c_{p}_{s}"] if i in decoded else None
            if p > 38:
                got, want = value, ref.decimal_string(u, s)
            elif fits:
                got, want = value, Decimal(u).scaleb(-s)
            else:
                got, want = dead.get(i), "unrepresentable_value"
            if got != want or (fits and i in dead):
                problems.append((u, p, s, got, want))
    assert problems == []
