"""Decoding the all-types captures and comparing them with the database's own rows, column by column.

Shared by ``tests/unit/decode/test_capture_equality.py`` (schemas on, and schemas off with the connector-side
schema) and ``tests/integration/test_schemas_off_captures.py`` (schemas off, types from the live database).

For each capture (PostgreSQL, MariaDB) and converter setting (schemas on / off) the capture is decoded and:

* the ``r`` events, per key, are compared with ``after_snapshot`` of ``<db>_all_types.rows.json``;
* the latest event per key (greatest ``_cdc_position``; ``d`` removes the key; columns listed in
  ``_cdc_keep_columns`` keep the key's previous value) is compared with ``after_stream``.

Schemas off: the schema source is the **connector-side schema**: the Connect ``Value`` struct schema of the
paired schemas-on capture's ``after`` field, given to :class:`ConnectSchemaSource` (what the connector itself
declared for the table; nothing is inferred from values).

Both sides are rendered canonically by small per-type normalisers (one per column below). Where Debezium changes
a value by a documented rule, the normaliser applies that rule to the database side and says so.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdclake.decode import ConnectSchemaSource, DecodeOptions, SchemaSource, decode_records, read_jsonl

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
Normaliser = Callable[[Any], Any]


# -- canonical renderings ---------------------------------------------------------------------------------------


def _same(v: Any) -> Any:
    return v


def _int(v: Any) -> int:
    return int(v)


def _float32(v: Any) -> Any:
    """float32 values (real/FLOAT): compare after rounding both sides to float32; NaN as the string 'NaN'."""
    x = float(v)  # the database renders 'Infinity' / 'NaN' as strings
    return "NaN" if math.isnan(x) else struct.unpack("<f", struct.pack("<f", x))[0]


def _float64(v: Any) -> Any:
    x = float(v)
    return "NaN" if math.isnan(x) else x


def _decimal(v: Any) -> Decimal:
    """numeric text / JSON number / Decimal -> Decimal (numeric equality, so 1.50 == 1.5)."""
    return Decimal(str(v))


def _float_rounded_decimal(v: Any) -> float:
    """Wide numerics: the capture tool parsed the database's JSON number into a Python float before writing
    rows.json (psycopg/json), so the reference has 17 significant digits; compare at that precision. The exact
    decoded strings are asserted against the inserted literals in ``test_wide_numerics_are_exact``."""
    return float(Decimal(str(v)))


def _money(v: Any) -> Decimal:
    """PostgreSQL money text ('-$12.34', '$0.00', lc_monetary C) -> Decimal; decoded as Decimal(scale 2)."""
    return v if isinstance(v, Decimal) else Decimal(str(v).replace("$", "").replace(",", ""))


def _pg_bytea(v: Any) -> bytes:
    return bytes(v) if isinstance(v, bytes | bytearray) else bytes.fromhex(v.removeprefix("\\x"))


def _hex_bytes(v: Any) -> bytes:
    """MariaDB HEX() text -> bytes; decoded binary -> bytes."""
    return bytes(v) if isinstance(v, bytes | bytearray) else bytes.fromhex(v)


def _date(v: Any) -> date:
    return v if isinstance(v, date) else date.fromisoformat(v)


def _time_micros(v: Any) -> int:
    """'23:59:59.999999' / MariaDB '-838:59:59.000000' -> microseconds; decoded times are long micros."""
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?", v)
    assert m, v
    sign, h, mi, s, frac = m.groups()
    micros = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int((frac or "0").ljust(6, "0"))
    return -micros if sign else micros


def _timetz_utc(v: Any) -> int:
    """Debezium ZonedTime: PostgreSQL timetz is emitted normalised to UTC ('12:00:00+02' -> '10:00:00Z'); the
    original offset is not carried (documented io.debezium.time.ZonedTime rule). Compare UTC micros of day."""
    m = re.fullmatch(r"(\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d(?::?\d\d)?)", v)
    assert m, v
    local, zone = m.groups()
    offset = 0
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hh, mm = zone[1:3], zone[3:].lstrip(":") or "0"
        offset = sign * (int(hh) * 60 + int(mm)) * 60 * 1_000_000
    return (_time_micros(local) - offset) % (24 * 3600 * 1_000_000)


def _naive_ts(v: Any) -> datetime:
    """Wall-clock timestamps: decoded timestamp_ntz -> naive datetime; '2024-02-29T13:14:15.123456' parsed."""
    return v if isinstance(v, datetime) else datetime.fromisoformat(v)


def _utc_ts(v: Any) -> datetime:
    """Instants -> naive UTC. Decoded timestamps are collected as local-time naive datetimes (PySpark);
    database text carries an offset (PostgreSQL) or is in the server's zone, UTC (MariaDB TIMESTAMP)."""
    if isinstance(v, str):
        parsed = datetime.fromisoformat(v)
        return (parsed.astimezone(UTC) if parsed.tzinfo else parsed).replace(tzinfo=None)
    return v.astimezone(UTC).replace(tzinfo=None)


_PG_INTERVAL = re.compile(
    r"(?:(?P<y>-?\d+) years? ?)?(?:(?P<mo>-?\d+) mons? ?)?(?:(?P<d>-?\d+) days? ?)?"
    r"(?:(?P<sign>-)?(?P<t>\d+:\d\d:\d\d(?:\.\d+)?))?"
)


def _pg_interval(v: Any) -> int:
    """Debezium MicroDuration (interval.handling.mode=numeric): months count 365.25/12 = 30.4375 days
    (io.debezium.time.MicroDuration.DAYS_PER_MONTH_AVG), so '1 year 2 mons' is approximate by design; the
    database text is converted by the same rule."""
    if isinstance(v, int):
        return v
    m = _PG_INTERVAL.fullmatch(v.strip())
    assert m, v
    months = int(m["y"] or 0) * 12 + int(m["mo"] or 0)
    days = Decimal(months) * Decimal("30.4375") + int(m["d"] or 0)
    micros = int(days * 86_400 * 1_000_000)
    if m["t"]:
        t = _time_micros(m["t"])
        micros += -t if m["sign"] else t
    return micros


def _json(v: Any) -> Any:
    return json.loads(v, parse_float=Decimal) if isinstance(v, str) else v


def _bits_int(v: Any) -> int:
    """io.debezium.data.Bits: little-endian bytes of the bit string's integer value; the bit length is only in
    the schema (parameters.length), so B'' and B'0...0' both become empty/zero bytes. Compare integer values.
    Database side: PostgreSQL bit text ('10100101') or MariaDB HEX() ('AAA')."""
    if isinstance(v, bytes | bytearray):
        return int.from_bytes(bytes(v), "little")
    if isinstance(v, bool):
        return int(v)
    return v


def _pg_bit_text(v: Any) -> int:
    return _bits_int(v) if not isinstance(v, str) else (int(v, 2) if v else 0)


def _maria_bit_hex(v: Any) -> int:
    """MariaDB BIT(1) decodes as boolean (Debezium), BIT(n>1) as Bits bytes; database side HEX()."""
    return _bits_int(v) if not isinstance(v, str) else int(v, 16)


def _point(v: Any) -> tuple[float, float]:
    """PostgreSQL '(x,y)' / MariaDB ST_AsText 'POINT(x y)' vs decoded struct<x, y, wkb, srid>; the WKB must
    encode the same coordinates."""
    if isinstance(v, str):
        m = re.fullmatch(r"\(([^,]+),([^)]+)\)|POINT\((\S+) (\S+)\)", v)
        assert m, v
        x, y = (m[1], m[2]) if m[1] is not None else (m[3], m[4])
        return float(x), float(y)
    wkb = bytes(v["wkb"])
    order = "<" if wkb[0] == 1 else ">"
    kind, wx, wy = struct.unpack(order + "Idd", wkb[1:21])
    assert kind == 1 and (wx, wy) == (v["x"], v["y"]), v
    return float(v["x"]), float(v["y"])


def _unsigned_bigint_as_long(v: Any) -> int:
    """MariaDB BIGINT UNSIGNED with bigint.unsigned.handling.mode=long (the connector's default, used by
    include/connectors/mariadb.yaml): Debezium emits the value as a Java long, so values >= 2**63 wrap
    (18446744073709551615 -> -1). The decoder cannot undo this (the Connect schema is a plain int64); the
    lossless setting is bigint.unsigned.handling.mode=precise (Decimal(20,0) -> decimal(20,0))."""
    n = int(v)
    return n - 2**64 if n >= 2**63 else n


PG_COLUMNS: dict[str, Normaliser] = {
    "id": _int,
    "c_smallint": _int,
    "c_integer": _int,
    "c_bigint": _int,
    "c_real": _float32,
    "c_double": _float64,
    "c_numeric": _decimal,
    "c_numeric_big": _float_rounded_decimal,
    "c_numeric_var": _float_rounded_decimal,
    "c_money": _money,
    "c_bool": _same,
    "c_text": _same,
    "c_varchar": _same,
    "c_char": _same,
    "c_bytea": _pg_bytea,
    "c_date": _date,
    "c_time": _time_micros,
    "c_timetz": _timetz_utc,
    "c_timestamp": _naive_ts,
    "c_timestamptz": _utc_ts,
    "c_interval": _pg_interval,
    "c_uuid": _same,
    "c_json": _json,
    "c_jsonb": _json,
    "c_xml": _same,
    "c_int_array": _same,
    "c_text_array": _same,
    "c_bit": _pg_bit_text,
    "c_varbit": _pg_bit_text,
    "c_enum": _same,
    "c_point": _point,
    "c_inet": _same,
    "c_big_text": _same,
}
MARIA_COLUMNS: dict[str, Normaliser] = {
    "id": _int,
    "c_tinyint": _int,
    "c_tinyint_u": _int,
    "c_bool": _int,  # TINYINT(1): int16 0/1 on the wire (tinyInt1isBit off), database 0/1
    "c_smallint_u": _int,
    "c_mediumint": _int,
    "c_int_u": _int,
    "c_bigint": _int,
    "c_bigint_u": _unsigned_bigint_as_long,
    "c_float": _float32,
    "c_double": _float64,
    "c_decimal": _decimal,
    "c_decimal_big": _float_rounded_decimal,
    "c_bit1": _maria_bit_hex,
    "c_bit12": _maria_bit_hex,
    "c_char": _same,
    "c_varchar": _same,
    "c_text": _same,
    "c_blob": _hex_bytes,
    "c_binary": _hex_bytes,
    "c_varbinary": _hex_bytes,
    "c_date": _date,
    "c_time": _time_micros,
    "c_datetime": _naive_ts,
    "c_timestamp": _utc_ts,
    "c_year": _int,
    "c_enum": _same,
    "c_set": _same,
    "c_json": _json,
    "c_point": _point,
}
#: Columns of all_types NOT compared: none (every column of both tables has a normaliser above).
EXCLUDED: frozenset[str] = frozenset()
#: The database side normalisers that apply a Debezium rule (pinned): see their docstrings.
PINNED = {
    "pg": {"c_timetz", "c_interval", "c_bit", "c_varbit", "c_numeric_big", "c_numeric_var"},
    "mariadb": {"c_bigint_u", "c_bit12", "c_decimal_big"},
}
DIALECTS = {"pg": PG_COLUMNS, "mariadb": MARIA_COLUMNS}


# -- decoding and folding -----------------------------------------------------------------------------------------


def _connector_side_schema(which: str) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The ``after`` Connect schema and key fields of the schemas-on capture's data topic (the connector-side
    schema), keyed by ``<db-or-schema>.<table>``."""
    for line in (CAPTURES / f"{which}_all_types_schemas.jsonl").read_text().splitlines():
        record = json.loads(line)
        if not record["topic"].endswith(".all_types") or not record["value"]:
            continue
        value, key = json.loads(record["value"]), json.loads(record["key"])
        after = next(fld for fld in value["schema"]["fields"] if fld["field"] == "after")
        table = ".".join(record["topic"].split(".")[1:])
        return table, after, tuple(fld["field"] for fld in key["schema"]["fields"])
    raise AssertionError(f"no data record in the {which} schemas-on capture")


_DECODED: dict[tuple[str, bool], tuple[list[dict[str, Any]], list[str]]] = {}


def decoded(spark: SparkSession, which: str, schemas: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`decode_capture` of a capture, schemas off with the connector-side schema; once per session."""
    if (which, schemas) not in _DECODED:
        _DECODED[which, schemas] = decode_capture(spark, which, schemas)
    return _DECODED[which, schemas]


def decode_capture(
    spark: SparkSession, which: str, schemas: bool, schema_source: SchemaSource | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The decoded change rows of ``<which>_all_types_{schemas,noschemas}.jsonl`` and the table's column names.

    Schemas off, the column types come from ``schema_source``, by default the connector-side schema.
    """
    path = CAPTURES / f"{which}_all_types_{'schemas' if schemas else 'noschemas'}.jsonl"
    options = DecodeOptions()
    if not schemas:
        if schema_source is None:
            table, after, keys = _connector_side_schema(which)
            schema_source = ConnectSchemaSource({table: after}, keys={table: keys})
        options = DecodeOptions(key_schemas_enabled=False, value_schemas_enabled=False, schema_source=schema_source)
    batch = decode_records(read_jsonl(spark, path), options=options)
    assert batch.dead_letters.count() == 0
    (table_id,) = batch.tables
    frame = batch.tables[table_id]
    rows = [r.asDict(recursive=True) for r in frame.collect()]
    return rows, list(batch.table_info[table_id].schema.names)


def _data(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_cdc_")}


def _fold(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["_cdc_position"]):
        key = row["id"]
        if row["_cdc_op"] == "d":
            state.pop(key, None)
            continue
        new = _data(row)
        for column in row["_cdc_keep_columns"] or []:
            new[column] = state[key][column]
        state[key] = new
    return state


def _reference(which: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{which}_all_types.rows.json").read_text(), parse_float=Decimal)


def _compare(which: str, decoded: dict[int, dict[str, Any]], expected: list[dict[str, Any]], label: str) -> None:
    columns = DIALECTS[which]
    assert sorted(decoded) == sorted(r["id"] for r in expected), label
    problems = []
    for want in expected:
        got = decoded[want["id"]]
        for column, norm in columns.items():
            a, b = got[column], want[column]
            a = None if a is None else norm(a)
            b = None if b is None else norm(b)
            if a != b:
                problems.append(f"{label} id={want['id']} {column}: decoded {a!r} != database {b!r}")
    assert not problems, "\n".join(problems)


def assert_equal_to_database(which: str, rows: list[dict[str, Any]], names: list[str]) -> None:
    """The decoded rows equal ``rows.json``: the snapshot's ``r`` events, and the latest state after the stream."""
    reference = _reference(which)
    table_columns = set(reference["after_snapshot"][0])
    assert set(names) == table_columns
    assert set(DIALECTS[which]) == table_columns - EXCLUDED
    assert PINNED[which] <= set(DIALECTS[which])
    snapshot = {r["id"]: _data(r) for r in rows if r["_cdc_op"] == "r"}
    _compare(which, snapshot, reference["after_snapshot"], f"{which} snapshot")
    _compare(which, _fold(rows), reference["after_stream"], f"{which} stream")
