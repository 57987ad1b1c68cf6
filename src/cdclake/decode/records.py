"""The input contract (Kafka records as Spark's Kafka source gives them) and the JSON Lines record files.

A record file holds one Kafka record per line, in one of the line formats :func:`parse_record_line`
recognises (cdclake capture's, the same with headers as an object, kcat's ``-J``). :func:`read_record_file`
checks every line in one streaming pass; :func:`read_jsonl` loads files into a DataFrame for tests.
"""

from __future__ import annotations

import codecs
import json
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.exceptions import RecordSourceError, ReplayFileError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HEADER_TYPE = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))

#: Spark's Kafka source schema with ``includeHeaders=true``.
KAFKA_RECORD_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("headers", HEADER_TYPE),
    ]
)

#: Input accepted by :func:`cdclake.decode.decode_records` when keys/values are already strings.
STRING_RECORD_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
        T.StructField("headers", HEADER_TYPE),
    ]
)


@dataclass(frozen=True)
class SampleRecord:
    """One sampled Kafka record, in the driver (key and value decoded as UTF-8 text)."""

    topic: str
    partition: int
    offset: int
    timestamp: datetime | None
    key: str | None
    value: str | None


class RecordSampler(Protocol):
    """Reads a few of a batch's records without scanning the batch (the ingestion job's Kafka source does).

    :func:`cdclake.decode.decode_records` takes one to find the schema versions of a batch in two small reads
    instead of two passes over every record. ``spread`` and ``at`` return records in the input contract's
    schema; ``spread_rows`` the same records as ``spread``, in the driver.
    """

    def spread(self) -> DataFrame:
        """Records from every part of the batch: each partition's first and last, and some in between."""

    def spread_rows(self) -> list[SampleRecord]:
        """The records of :meth:`spread`, in the driver."""

    def at(self, points: Sequence[tuple[str, int, int]]) -> DataFrame:
        """The batch's records at these ``(topic, partition, offset)`` coordinates."""


def sample_records(frame: DataFrame) -> list[SampleRecord]:
    """The records of a (small) frame in the driver (:meth:`RecordSampler.spread_rows` of a frame)."""
    return [
        SampleRecord(r["topic"], int(r["partition"]), int(r["offset"]), r["timestamp"], r["key"], r["value"])
        for r in normalise_records(frame).collect()
    ]


def normalise_records(records: DataFrame) -> DataFrame:
    """Project records onto :data:`STRING_RECORD_SCHEMA` (binary key/value decoded as UTF-8; missing headers null)."""
    cols = set(records.columns)
    headers = F.col("headers").cast(HEADER_TYPE) if "headers" in cols else F.lit(None).cast(HEADER_TYPE)
    timestamp = F.col("timestamp").cast("timestamp") if "timestamp" in cols else F.lit(None).cast("timestamp")
    return records.select(
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        timestamp.alias("timestamp"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        headers.alias("headers"),
    )


def _to_row(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    ts = obj.get("timestamp")
    if isinstance(ts, int | float):
        stamp: datetime | None = datetime.fromtimestamp(ts / 1000, tz=UTC)
    elif isinstance(ts, str):
        stamp = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    else:
        stamp = None
    headers = obj.get("headers")
    if isinstance(headers, Mapping):
        headers = [{"key": k, "value": v} for k, v in headers.items()]
    header_rows = (
        None
        if headers is None
        else [(h["key"], None if h.get("value") is None else str(h["value"]).encode()) for h in headers]
    )
    return (
        obj["topic"],
        int(obj.get("partition", 0)),
        int(obj["offset"]),
        stamp,
        obj.get("key"),
        obj.get("value"),
        header_rows,
    )


def records_from_dicts(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    """Build an input DataFrame from dicts ``{"topic","partition","offset","timestamp","key","value","headers"}``.

    ``key``/``value`` are the exact record strings (or ``None``); ``timestamp`` is epoch millis or ISO-8601;
    ``headers`` is a list of ``{"key", "value"}`` (values as strings) or a dict.
    """
    return spark.createDataFrame([_to_row(r) for r in rows], STRING_RECORD_SCHEMA)


def read_jsonl(spark: SparkSession, paths: str | Path | Iterable[str | Path]) -> DataFrame:
    """Load recorded records from JSON Lines files (one record per line, any format of :func:`parse_record_line`).

    Args:
        spark: the session.
        paths: one path or several; directories are expanded to their ``*.jsonl`` files.

    Returns:
        A DataFrame with :data:`STRING_RECORD_SCHEMA`.

    Raises:
        ReplayFileError: a line is not a record (the message names the file and the line).
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.jsonl")) if p.is_dir() else [p])
    seen = RecordCoordinates()
    rows = [line.record.row() for file in files for line in read_record_file(file, seen)]
    return spark.createDataFrame(rows, STRING_RECORD_SCHEMA)


# --- record files: one Kafka record per line ---

#: What a record file's lines may be, for error messages.
RECORD_LINE_FORMATS = (
    'cdclake capture\'s format ({"topic", "partition", "offset", "timestamp", "key", "value", '
    '"headers": [{"key", "value"}]}), the same with "headers" as an object of name: value, '
    'or kcat -J output ({"topic", "partition", "offset", "ts", "headers": [name, value, ...], "key", "payload"})'
)

_JSON = json.JSONDecoder()
_INT32_MAX = 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

Headers = tuple[tuple[str, str | None], ...]


class _LineError(ValueError):
    """What is wrong with one line (the caller adds the file and line number)."""


@dataclass(frozen=True, slots=True)
class RecordLine:
    """One record of a record file, whatever its line format: key and value as the record's exact text."""

    topic: str
    partition: int
    offset: int
    #: epoch milliseconds, None when the dump has none
    timestamp: int | None
    key: str | None
    value: str | None
    headers: Headers | None

    def capture_json(self) -> str:
        """The record as one line of cdclake capture's format (without the newline)."""
        headers = None if self.headers is None else [{"key": k, "value": v} for k, v in self.headers]
        return json.dumps(
            {
                "topic": self.topic,
                "partition": self.partition,
                "offset": self.offset,
                "timestamp": self.timestamp,
                "key": self.key,
                "value": self.value,
                "headers": headers,
            },
            ensure_ascii=False,
        )

    def row(self) -> tuple[Any, ...]:
        """The record as a row of :data:`STRING_RECORD_SCHEMA`."""
        stamp = None if self.timestamp is None else datetime.fromtimestamp(self.timestamp / 1000, tz=UTC)
        headers = None if self.headers is None else [(k, None if v is None else v.encode()) for k, v in self.headers]
        return (self.topic, self.partition, self.offset, stamp, self.key, self.value, headers)

    def digest(self) -> int:
        """A non-zero 64-bit hash of what the record holds besides its coordinates (no headers == empty headers)."""
        return hash((self.timestamp, self.key, self.value, self.headers or ())) or 1


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(obj: Mapping[str, Any], name: str, low: int, high: int) -> int:
    if name not in obj:
        raise _LineError(f'no "{name}" field (every line needs "topic", "partition" and "offset")')
    value = obj[name]
    if type(value) is not int or not low <= value <= high:  # not a bool either
        raise _LineError(f'"{name}" must be an integer from {low} to {high}, got {_show(value)}')
    return value


def _text(obj: Mapping[str, Any], name: str, hint: str = "") -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise _LineError(f'"{name}" must be a string (the record\'s exact text) or null, got {_show(value)}{hint}')
    return value


def _millis(value: object, name: str) -> tuple[int | None, bool]:
    """Epoch milliseconds from an integer, a number or an ISO-8601 string; and whether it was an integer."""
    if value is None:
        return None, True
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:  # not a bool either
        return value, True
    if isinstance(value, float) and value == value and abs(value) < 2**63:
        return int(value), False
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            stamp = stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
            return round(stamp.timestamp() * 1000), False
    raise _LineError(
        f'"{name}" must be epoch milliseconds (an integer), an ISO-8601 string or null, got {_show(value)}'
    )


def _header_value(value: object, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _LineError(f"{where} must be a string or null, got {_show(value)}")
    return value


def _header_object(headers: Mapping[str, Any]) -> Headers:
    """Headers written as an object: ``{name: value}``, or ``{name: [value, ...]}`` for repeated names."""
    out: list[tuple[str, str | None]] = []
    for name, value in headers.items():
        if isinstance(value, list):
            out += [(name, _header_value(v, f'header "{name}" value {i}')) for i, v in enumerate(value)]
        else:
            out.append((name, _header_value(value, f'header "{name}"')))
    return tuple(out)


def _capture_headers(headers: object) -> tuple[Headers | None, bool]:
    """Headers of the capture format (a list of ``{"key", "value"}``) or an object; and whether a list."""
    if headers is None:
        return None, True
    if isinstance(headers, dict):
        return _header_object(headers), False
    if not isinstance(headers, list):
        raise _LineError(
            f'"headers" must be a list of {{"key", "value"}} objects, an object of name: value, or null, '
            f"got {_show(headers)}"
        )
    out: list[tuple[str, str | None]] = []
    for i, header in enumerate(headers):
        if not isinstance(header, dict) or not isinstance(header.get("key"), str):
            raise _LineError(f'"headers"[{i}] must be an object with a string "key", got {_show(header)}')
        out.append((header["key"], _header_value(header.get("value"), f'"headers"[{i}] "value"')))
    return tuple(out), True


def _kcat_headers(headers: object) -> Headers | None:
    """kcat's headers: a flat list ``[name, value, name, value, ...]``, or an object of name: [values]."""
    if headers is None:
        return None
    if isinstance(headers, dict):
        return _header_object(headers)
    if not isinstance(headers, list):
        raise _LineError(f'"headers" of a kcat -J line must be a list [name, value, ...], got {_show(headers)}')
    if len(headers) % 2:
        raise _LineError(
            f'"headers" of a kcat -J line must hold name, value pairs; it has an odd number of items ({len(headers)})'
        )
    out: list[tuple[str, str | None]] = []
    for i in range(0, len(headers), 2):
        name = headers[i]
        if not isinstance(name, str):
            raise _LineError(f'"headers"[{i}] must be a header name (a string), got {_show(name)}')
        out.append((name, _header_value(headers[i + 1], f'"headers"[{i + 1}] (the value of "{name}")')))
    return tuple(out)


def parse_record_line(line: str | bytes) -> tuple[RecordLine, bool]:
    """One line of a record file, in any of its formats, recognised from the line itself.

    * ``"value"`` present: cdclake capture's format; ``headers`` a list of ``{"key", "value"}`` or an object
      of ``name: value`` (``name: [value, ...]`` for a repeated name); ``timestamp`` epoch milliseconds, an
      ISO-8601 string (UTC unless it says otherwise) or null.
    * ``"payload"`` present instead: kcat's ``-J`` envelope; ``ts`` epoch milliseconds, ``headers`` a flat
      list ``[name, value, ...]`` (or kcat's object of ``name: [value, ...]``); ``tstype`` and ``broker``
      are not kept.

    Both need ``topic`` (a non-empty string), ``partition`` and ``offset`` (integers); ``key`` and the value
    are strings or null (absent: null), other fields are ignored.

    Returns:
        The record, and whether the line is already in the capture format exactly as Spark's JSON reader of
        replay takes it (headers as a list, an integer or null timestamp): such a line can be read as is.

    Raises:
        ValueError: what is wrong with the line (a private subclass; :func:`read_record_file` turns it into a
            :class:`ReplayFileError` naming the file and line).
    """
    bom = False
    if isinstance(line, bytes):
        if line.startswith(codecs.BOM_UTF8):  # a byte order mark Spark's reader would not skip
            line, bom = line[len(codecs.BOM_UTF8) :], True
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _LineError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        obj = _JSON.decode(line)
    except json.JSONDecodeError as exc:
        raise _LineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _LineError(f"not a JSON object but {_show(obj)}; each line must be one record: {RECORD_LINE_FORMATS}")
    topic = obj.get("topic")
    if not isinstance(topic, str) or not topic:
        what = 'no "topic" field' if "topic" not in obj else f'"topic" must be a non-empty string, got {_show(topic)}'
        raise _LineError(what)
    partition = _int(obj, "partition", 0, _INT32_MAX)
    offset = _int(obj, "offset", 0, _INT64_MAX)
    if "value" in obj:
        timestamp, whole = _millis(obj.get("timestamp"), "timestamp")
        headers, listed = _capture_headers(obj.get("headers"))
        record = RecordLine(topic, partition, offset, timestamp, _text(obj, "key"), _text(obj, "value"), headers)
        return record, whole and listed and not bom
    if "payload" in obj:
        for field in ("key_error", "payload_error"):
            if field in obj:
                raise _LineError(
                    f'kcat could not deserialize the record ("{field}": {_show(obj[field])}); '
                    "dump the topic without -s/-D deserializers"
                )
        hint = " (kcat deserialized it: dump the topic without -s avro)"
        timestamp, _ = _millis(obj.get("ts"), "ts")
        record = RecordLine(
            topic,
            partition,
            offset,
            timestamp,
            _text(obj, "key", hint),
            _text(obj, "payload", hint),
            _kcat_headers(obj.get("headers")),
        )
        return record, False
    raise _LineError(f'no "value" (capture format) or "payload" (kcat -J) field; replay reads {RECORD_LINE_FORMATS}')


class RecordFileLine(NamedTuple):
    """A line of a record file: its number (from 1), where it starts (bytes), its text and its record."""

    number: int
    start: int
    raw: bytes
    record: RecordLine
    #: the line is in the capture format exactly as Spark's reader of replay takes it
    native: bool


class _PartitionDigests:
    """The record digests of one topic-partition by offset: an array over the dense run of offsets Kafka
    gives (8 bytes a record), a dict for offsets before the first one seen or far past the run."""

    __slots__ = ("base", "dense", "sparse")

    #: Offsets past the end of the dense run filled with empty slots rather than kept in the dict.
    MAX_GAP = 1 << 16

    def __init__(self, base: int) -> None:
        self.base = base
        self.dense = array("q")
        self.sparse: dict[int, int] = {}

    def put(self, offset: int, digest: int) -> int:
        """Record ``digest`` at ``offset`` unless one is there; the one there before (0: none)."""
        i = offset - self.base
        size = len(self.dense)
        if 0 <= i < size:
            before = self.dense[i]
            if not before:
                self.dense[i] = digest
            return before
        if size <= i <= size + self.MAX_GAP:
            if i > size:
                self.dense.frombytes(bytes(8 * (i - size)))
            self.dense.append(digest)
            return 0
        before = self.sparse.get(offset, 0)
        if not before:
            self.sparse[offset] = digest
        return before


class RecordCoordinates:
    """The records read so far by ``(topic, partition, offset)``: the same record again (overlapping dumps)
    is fine, a different one at the same coordinates is not. Keeps a 64-bit digest per record."""

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], _PartitionDigests] = {}
        #: the files read so far, to find the first line of a conflicting record
        self.files: list[Path] = []

    def agrees(self, record: RecordLine) -> bool:
        """Add the record; False when another record with different content was added at its coordinates."""
        part = self._partitions.get((record.topic, record.partition))
        if part is None:
            part = self._partitions[(record.topic, record.partition)] = _PartitionDigests(record.offset)
        digest = record.digest()
        before = part.put(record.offset, digest)
        return not before or before == digest

    def first_line(self, record: RecordLine) -> str:
        """``file:line`` of the first line read at the record's coordinates (a second pass: error path only)."""
        for path in self.files:
            with path.open("rb") as f:
                for number, raw in enumerate(f, 1):
                    try:
                        other, _ = parse_record_line(raw)
                    except _LineError:
                        continue
                    if (other.topic, other.partition, other.offset) == (record.topic, record.partition, record.offset):
                        return f"{path}:{number}"
        return "an earlier line"


def read_record_file(path: str | Path, seen: RecordCoordinates | None = None) -> Iterator[RecordFileLine]:
    """Every record line of a JSON Lines record file, checked as it is read (blank lines are skipped).

    Args:
        path: the file.
        seen: the records of the files read before (and this one's, as it is read); a record at the same
            coordinates as one of them must be the same record.

    Raises:
        ReplayFileError: a line is not a record in a format of :func:`parse_record_line`, or differs from an
            earlier record at its coordinates (the message names the file and the line).
        RecordSourceError: the file cannot be read.
    """
    path = Path(path)
    if seen is not None:
        seen.files.append(path)
    try:
        f = path.open("rb")
    except OSError as exc:
        raise RecordSourceError(f"cannot read record file {path}: {exc.strerror or exc}") from exc
    with f:
        start = 0
        for number, raw in enumerate(f, 1):
            here, start = start, start + len(raw)
            if raw.isspace():
                continue
            try:
                record, native = parse_record_line(raw)
            except _LineError as exc:
                raise ReplayFileError(str(exc), path=str(path), line=number) from None
            if seen is not None and not seen.agrees(record):
                first = seen.first_line(record)
                raise ReplayFileError(
                    f"{record.topic}/{record.partition}@{record.offset} differs from the record at the same "
                    f"coordinates on {first} (timestamp, key, value or headers); two dumps of one topic must "
                    "agree: drop the file that is not from this topic's log",
                    path=str(path),
                    line=number,
                )
            yield RecordFileLine(number, here, raw, record, native)
