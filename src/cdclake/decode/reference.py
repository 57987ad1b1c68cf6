"""Pure-Python reference converters for the Connect/Debezium logical types (tests check Spark against these)."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

_EPOCH = datetime(1970, 1, 1)


def encode_unscaled(unscaled: int) -> str:
    """base64 of the minimal big-endian two's-complement bytes of ``unscaled`` (as Kafka Connect writes Decimal)."""
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def decode_unscaled(text: str) -> int:
    """Inverse of :func:`encode_unscaled`."""
    return int.from_bytes(base64.b64decode(text), "big", signed=True)


def decode_decimal(text: str, scale: int) -> Decimal:
    """A Connect ``Decimal`` value (base64 unscaled, fixed ``scale``) as a :class:`~decimal.Decimal`."""
    return Decimal(decode_unscaled(text)).scaleb(-scale)


def decimal_string(unscaled: int, scale: int) -> str:
    """Plain (non-exponent) text of ``unscaled * 10**-scale``, as the decoder renders lossless decimals."""
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled))
    if scale <= 0:
        return sign + digits + ("0" * -scale if unscaled else "")
    digits = digits.rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def date_from_days(days: int) -> date:
    """``io.debezium.time.Date`` / Connect ``Date``."""
    return date(1970, 1, 1) + timedelta(days=days)


def time_micros_from_millis(millis: int) -> int:
    """``io.debezium.time.Time`` / Connect ``Time`` -> microseconds of the day."""
    return millis * 1000


def time_micros_from_nanos(nanos: int) -> int:
    """``io.debezium.time.NanoTime`` -> microseconds (floor)."""
    return nanos // 1000


def timestamp_ntz_from_micros(micros: int) -> datetime:
    """``MicroTimestamp`` -> naive wall-clock datetime."""
    return _EPOCH + timedelta(microseconds=micros)


def timestamp_ntz_from_millis(millis: int) -> datetime:
    """``io.debezium.time.Timestamp`` / Connect ``Timestamp`` -> naive wall-clock datetime."""
    return timestamp_ntz_from_micros(millis * 1000)


def timestamp_ntz_from_nanos(nanos: int) -> datetime:
    """``NanoTimestamp`` -> naive wall-clock datetime (floor to microseconds)."""
    return timestamp_ntz_from_micros(nanos // 1000)


def timestamp_from_zoned(text: str) -> datetime:
    """``ZonedTimestamp`` ISO-8601 text -> aware UTC datetime (sub-microsecond digits truncated)."""
    value = text.replace("Z", "+00:00")
    if "." in value:
        head, rest = value.split(".", 1)
        cut = next((i for i, ch in enumerate(rest) if not ch.isdigit()), len(rest))
        value = f"{head}.{rest[:cut][:6].ljust(6, '0')}{rest[cut:]}"
    return datetime.fromisoformat(value).astimezone(UTC)
