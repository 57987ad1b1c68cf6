"""Property tests: pure-Python reference converters, and Spark expressions agreeing with them on samples."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdclake.decode import reference as ref
from cdclake.decode.connect import plain_decimal_string, plan_type, unscaled_from_base64

#: What decode handles natively: |unscaled| <= 10**38 - 2**64 (the 128-bit sum must stay in decimal(38,0));
#: wider values are dead-lettered, never rounded.
_LIMIT = 10**38 - 2**64
INT38 = st.integers(min_value=-_LIMIT, max_value=_LIMIT)


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


@pytest.mark.spark
@settings(max_examples=1, deadline=None)
@given(
    st.lists(INT38, min_size=20, max_size=20),
    st.lists(st.integers(min_value=0, max_value=38), min_size=20, max_size=20),
    st.lists(st.integers(min_value=-(2**52), max_value=2**52), min_size=20, max_size=20),
)
def test_spark_expressions_agree_with_reference(
    spark: SparkSession, unscaled: list[int], scales: list[int], longs: list[int]
) -> None:
    """One Spark job per hypothesis example, checking 20 sampled values of each converter."""
    unscaled = [*unscaled, 0, -1, _LIMIT, -_LIMIT, 255, -128]
    scales = [*scales, 0, 3, 0, 5, 0, 1]
    longs = [*longs, 0, -1, -999, 1000, -1000, 1]
    days = [x % 1_400_000 - 700_000 for x in longs]
    rows = [(ref.encode_unscaled(u), s, n, d) for u, s, n, d in zip(unscaled, scales, longs, days, strict=True)]
    df = spark.createDataFrame(rows, "b string, s int, n long, d int")
    conv = {
        name: plan_type({"type": "int64", "name": name}).convert
        for name in ("io.debezium.time.NanoTimestamp", "io.debezium.time.MicroTimestamp", "io.debezium.time.NanoTime")
    }
    out = df.select(
        plain_decimal_string(unscaled_from_base64(F.col("b")), F.col("s")).alias("dec"),
        conv["io.debezium.time.NanoTimestamp"](F.col("n")).alias("nts"),
        conv["io.debezium.time.MicroTimestamp"](F.floor(F.col("n") / F.lit(1000)).cast("long")).alias("uts"),
        conv["io.debezium.time.NanoTime"](F.col("n")).alias("nt"),
        plan_type({"type": "int32", "name": "io.debezium.time.Date"}).convert(F.col("d")).alias("date"),
        plan_type({"type": "int64", "name": "io.debezium.time.Timestamp"})
        .convert(F.floor(F.col("n") / F.lit(10**6)).cast("long"))
        .alias("ms"),
        plan_type({"type": "string", "name": "io.debezium.time.ZonedTimestamp"})
        .convert(F.lit("2024-02-29T23:59:59.123456789+05:30"))
        .alias("z"),
    ).collect()
    for (u, s, n, d), row in zip(zip(unscaled, scales, longs, days, strict=True), out, strict=True):
        assert row["dec"] == ref.decimal_string(u, s)
        if abs(n // 1000) < 253402300799 * 10**6:
            assert row["nts"] == ref.timestamp_ntz_from_nanos(n)
            assert row["uts"] == ref.timestamp_ntz_from_micros(n // 1000)
        assert row["nt"] == ref.time_micros_from_nanos(n)
        assert row["date"] == ref.date_from_days(d)
        assert row["ms"] == ref.timestamp_ntz_from_millis(n // 10**6)
        assert row["z"].replace(tzinfo=UTC) == ref.timestamp_from_zoned("2024-02-29T23:59:59.123456789+05:30")


def test_zoned_reference() -> None:
    assert ref.timestamp_from_zoned("2023-11-14T23:13:20.5+02:00") == datetime(
        2023, 11, 14, 21, 13, 20, 500000, tzinfo=UTC
    )


#: (precision, scale) pairs covering the three conversion paths of a Connect Decimal: long arithmetic
#: (value fits 8 bytes), decimal(38,0) arithmetic (precision + scale <= 37) and the string rendering.
_DECIMAL_TYPES = [(5, 0), (12, 2), (18, 6), (18, 0), (19, 4), (25, 10), (30, 7), (38, 0), (38, 2), (38, 20), (28, 28)]


@pytest.mark.spark
@settings(max_examples=1, deadline=None)
@given(st.lists(INT38, min_size=30, max_size=30))
def test_connect_decimal_plan_is_exact_on_every_path(spark: SparkSession, unscaled: list[int]) -> None:
    """Each (precision, scale): values that fit decode to the exact Decimal; values too wide are flagged invalid."""
    edge = [0, -1, 1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**18 - 1, -(10**18) + 1, 10**37, -_LIMIT, _LIMIT]
    values = [*unscaled, *edge]
    rows = [(ref.encode_unscaled(u), u) for u in values]
    df = spark.createDataFrame(rows, "b string, u string")
    plans = {
        (p, s): plan_type(
            {
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": str(s), "connect.decimal.precision": str(p)},
            }
        )
        for p, s in _DECIMAL_TYPES
    }
    cols = []
    for (p, s), plan in plans.items():
        cols += [plan.convert(F.col("b")).alias(f"v_{p}_{s}"), plan.invalid(F.col("b")).alias(f"i_{p}_{s}")]
    problems = []
    with localcontext() as ctx:
        ctx.prec = 100
        for row in df.select("u", *cols).collect():
            u = int(row["u"])
            for p, s in _DECIMAL_TYPES:
                fits = abs(u) < 10**p
                expected = Decimal(u).scaleb(-s) if fits else None
                if row[f"i_{p}_{s}"] is fits or row[f"v_{p}_{s}"] != expected:
                    problems.append((u, p, s, row[f"v_{p}_{s}"], row[f"i_{p}_{s}"]))
    assert problems == []
