"""Replay's record files: the three line formats give the same records, any other line is an error naming its
file and line, raised before Spark reads anything (``cdclake replay`` prints it and exits 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cdclake.cli import ingest as ingest_cli
from cdclake.cli.main import app, main
from cdclake.decode.records import RecordLine, read_jsonl, read_record_file
from cdclake.exceptions import ConfigError, ReplayFileError
from cdclake.ingest import sources
from cdclake.ingest.sources import ReplayRecordSource, prepare_replay_files

from .events import PgTable

#: Records of the capture format, chosen to cover what a format could lose: headers (one repeated, one null),
#: none at all, a null key, a tombstone, no timestamp, text that needs escaping.
CAPTURED: list[dict[str, Any]] = [
    {
        "topic": "pg.inventory.items",
        "partition": 0,
        "offset": 7,
        "timestamp": 1_700_000_000_123,
        "key": '{"id":1}',
        "value": '{"op":"c","after":{"id":1,"name":"caf\\u00e9 \\"quoted\\"\\n"}}',
        "headers": [
            {"key": "__debezium.context.taskId", "value": "0"},
            {"key": "trace", "value": None},
        ],
    },
    {
        "topic": "pg.inventory.items",
        "partition": 1,
        "offset": 0,
        "timestamp": None,
        "key": None,
        "value": "plain text ü ✓",
        "headers": None,
    },
    {
        "topic": "pg.transaction",
        "partition": 0,
        "offset": 3,
        "timestamp": 1_700_000_000_999,
        "key": '{"id":"tx-1"}',
        "value": None,
        "headers": [{"key": "a", "value": "1"}],
    },
]


def _headers_object(rec: dict[str, Any]) -> dict[str, Any]:
    headers = rec["headers"]
    return {**rec, "headers": None if headers is None else {h["key"]: h["value"] for h in headers}}


def _kcat(rec: dict[str, Any]) -> dict[str, Any]:
    """The record as kcat -J writes it (no tstype/ts when the record has no timestamp, no headers when none)."""
    out: dict[str, Any] = {"topic": rec["topic"], "partition": rec["partition"], "offset": rec["offset"]}
    if rec["timestamp"] is not None:
        out |= {"tstype": "create", "ts": rec["timestamp"]}
    out["broker"] = 1
    if rec["headers"]:
        out["headers"] = [x for h in rec["headers"] for x in (h["key"], h["value"])]
    return out | {"key": rec["key"], "payload": rec["value"]}


FORMATS = {"capture": lambda r: r, "headers-object": _headers_object, "kcat": _kcat}


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def _records(path: Path | str) -> list[RecordLine]:
    return [line.record for line in read_record_file(path)]


def _expected() -> list[RecordLine]:
    return [
        RecordLine(
            r["topic"],
            r["partition"],
            r["offset"],
            r["timestamp"],
            r["key"],
            r["value"],
            None if r["headers"] is None else tuple((h["key"], h["value"]) for h in r["headers"]),
        )
        for r in CAPTURED
    ]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_format_gives_the_captured_records(tmp_path: Path, fmt: str) -> None:
    path = _write(tmp_path / f"{fmt}.jsonl", [FORMATS[fmt](r) for r in CAPTURED])
    records = _records(path)
    expected = _expected()
    assert [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value) for r in expected
    ]
    # kcat writes no "headers" for a record without any
    assert [r.headers or () for r in records] == [r.headers or () for r in expected]
    # a line Spark's reader takes as it is: the capture format (a headers-object line without headers is one)
    natives = {"capture": [True] * 3, "headers-object": [r["headers"] is None for r in CAPTURED], "kcat": [False] * 3}
    assert [line.native for line in read_record_file(path)] == natives[fmt]


def test_repeated_header_names_and_iso_timestamps(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "d.jsonl",
        [
            {"topic": "t", "partition": 0, "offset": 0, "timestamp": "2023-11-14T22:13:20.123Z", "key": None,
             "value": "v", "headers": {"h": ["1", "2"], "g": None}},
            {"topic": "t", "partition": 0, "offset": 1, "ts": 5, "key": "k", "payload": "v",
             "headers": {"h": ["x", None]}},
        ],
    )  # fmt: skip
    first, second = _records(path)
    assert first.timestamp == 1_700_000_000_123 and first.headers == (("h", "1"), ("h", "2"), ("g", None))
    assert second.headers == (("h", "x"), ("h", None))


def test_spark_reads_capture_files_as_they_are_and_a_copy_of_the_others(tmp_path: Path) -> None:
    capture = _write(tmp_path / "capture.jsonl", CAPTURED)
    assert prepare_replay_files([capture]) == [str(capture)]

    # a mixed file: capture lines around kcat and headers-object lines, a blank line among them
    lines: list[Any] = [CAPTURED[0], "", _kcat(CAPTURED[1]), _headers_object(CAPTURED[2]), CAPTURED[0] | {"offset": 8}]
    mixed = _write(tmp_path / "mixed.jsonl", lines)
    [copy] = prepare_replay_files([mixed])
    assert copy != str(mixed) and Path(copy).parent == sources._copies_dir()
    copied = list(read_record_file(copy))
    assert all(line.native for line in copied)
    assert [line.record for line in copied] == _records(mixed)
    # the lines before the first one to rewrite are copied byte for byte
    assert Path(copy).read_bytes().startswith(mixed.read_bytes().split(b"\n", 2)[0] + b"\n\n")
    assert prepare_replay_files([mixed]) == [copy]  # the same files again: no second pass


BAD_LINES: list[tuple[str, Any, str]] = [
    ("invalid JSON", '{"topic": "t", "partition": 0,', "not valid JSON"),
    ("not an object", [1, 2], "not a JSON object"),
    ("no topic", {"partition": 0, "offset": 1, "value": "v"}, 'no "topic" field'),
    ("empty topic", {"topic": "", "partition": 0, "offset": 1, "value": "v"}, '"topic" must be a non-empty string'),
    ("no partition", {"topic": "t", "offset": 1, "value": "v"}, 'no "partition" field'),
    ("no offset", {"topic": "t", "partition": 0, "value": "v"}, 'no "offset" field'),
    ("partition text", {"topic": "t", "partition": "0", "offset": 1, "value": "v"}, '"partition" must be an integer'),
    ("partition bool", {"topic": "t", "partition": True, "offset": 1, "value": "v"}, '"partition" must be an integer'),
    ("offset negative", {"topic": "t", "partition": 0, "offset": -1, "value": "v"}, '"offset" must be an integer'),
    ("offset float", {"topic": "t", "partition": 0, "offset": 1.5, "value": "v"}, '"offset" must be an integer'),
    ("value object", {"topic": "t", "partition": 0, "offset": 1, "value": {"a": 1}}, '"value" must be a string'),
    ("value number", {"topic": "t", "partition": 0, "offset": 1, "value": 3}, '"value" must be a string'),
    ("key list", {"topic": "t", "partition": 0, "offset": 1, "key": [1], "value": "v"}, '"key" must be a string'),
    ("timestamp", {"topic": "t", "partition": 0, "offset": 1, "timestamp": "yesterday", "value": "v"}, '"timestamp"'),
    ("neither format", {"topic": "t", "partition": 0, "offset": 1, "message": "v"}, 'no "value"'),
    ("headers text", {"topic": "t", "partition": 0, "offset": 1, "value": "v", "headers": "h=1"}, '"headers" must'),
    ("header entry", {"topic": "t", "partition": 0, "offset": 1, "value": "v", "headers": [["h", "1"]]}, '"headers"[0]'),
    (
        "header value",
        {"topic": "t", "partition": 0, "offset": 1, "value": "v", "headers": [{"key": "h", "value": 1}]},
        '"headers"[0] "value" must be a string or null',
    ),
    ("header object value", {"topic": "t", "partition": 0, "offset": 1, "value": "v", "headers": {"h": 1}}, 'header "h"'),
    ("kcat odd headers", {"topic": "t", "partition": 0, "offset": 1, "payload": "v", "headers": ["h"]}, "name, value pairs"),
    ("kcat header name", {"topic": "t", "partition": 0, "offset": 1, "payload": "v", "headers": [1, "v"]}, '"headers"[0]'),
    ("kcat avro payload", {"topic": "t", "partition": 0, "offset": 1, "payload": {"id": 1}}, "without -s avro"),
    ("kcat ts", {"topic": "t", "partition": 0, "offset": 1, "ts": [], "payload": "v"}, '"ts" must be epoch'),
    ("kcat error", {"topic": "t", "partition": 0, "offset": 1, "payload": None, "payload_error": "x"}, "could not deser"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "message"), [(line, message) for _, line, message in BAD_LINES],
                         ids=[name for name, _, _ in BAD_LINES])  # fmt: skip
def test_a_bad_line_is_an_error_naming_file_and_line(tmp_path: Path, line: Any, message: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [CAPTURED[0], "", line, CAPTURED[1]])
    with pytest.raises(ReplayFileError) as caught:
        prepare_replay_files([path])
    assert isinstance(caught.value, ConfigError)
    assert (caught.value.path, caught.value.line) == (str(path), 3)
    assert str(caught.value).startswith(f"{path}:3: ") and message in str(caught.value)


def test_a_line_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(CAPTURED[0]).encode() + b'\n{"topic": "t\xe9", "partition": 0}\n')
    with pytest.raises(ReplayFileError, match=r"latin1\.jsonl:2: not UTF-8"):
        list(read_record_file(path))


def test_a_bad_line_leaves_no_copy_behind(tmp_path: Path) -> None:
    before = set(sources._copies_dir().iterdir())
    path = _write(tmp_path / "k.jsonl", [_kcat(CAPTURED[0]), _kcat(CAPTURED[1]), "{oops"])
    with pytest.raises(ReplayFileError, match=r"k\.jsonl:3: not valid JSON"):
        prepare_replay_files([path])
    assert set(sources._copies_dir().iterdir()) == before


def test_duplicate_coordinates_must_hold_the_same_record(tmp_path: Path) -> None:
    first = _write(tmp_path / "a.jsonl", CAPTURED)
    same = _write(tmp_path / "b.jsonl", [_kcat(CAPTURED[1]), _kcat(CAPTURED[0])])  # the same records, kcat's way
    prepare_replay_files([first, same])

    other = _write(tmp_path / "c.jsonl", [CAPTURED[1], CAPTURED[0] | {"value": "something else"}])
    with pytest.raises(ReplayFileError) as caught:
        prepare_replay_files([first, other])
    assert str(caught.value).startswith(f"{other}:2: pg.inventory.items/0@7 differs from the record")
    assert f"on {first}:1 " in str(caught.value)


def test_replay_cli_names_the_bad_line_and_exits_1_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_spark(lake: object) -> None:
        raise AssertionError("Spark was started for a file with a bad line")

    monkeypatch.setattr(ingest_cli, "_session", no_spark)
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "bad.jsonl", [CAPTURED[0], {"topic": "t", "partition": 0, "offset": 1, "value": {"a": 1}}])

    result = CliRunner().invoke(app, ["replay", "bad.jsonl"])
    assert result.exit_code == 1 and isinstance(result.exception, ReplayFileError)

    # the installed `cdclake` entry point: one line on stderr, no traceback
    monkeypatch.setattr(sys, "argv", ["cdclake", "replay", "bad.jsonl"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    out = capsys.readouterr()
    err = " ".join(out.err.split())
    assert err.startswith('error: ReplayFileError: bad.jsonl:2: "value" must be a string'), err
    assert "Traceback" not in out.err + out.out


@pytest.mark.spark
def test_replay_source_reads_every_format_alike(spark: Any, tmp_path: Path) -> None:
    items = PgTable(prefix="fmts", table="items")
    for i in range(3):
        items.create({"id": i, "name": f"n{i}", "qty": i}, lsn=100 + 10 * i)
    items.delete({"id": 0, "name": "n0", "qty": 0}, lsn=200)  # a delete and its tombstone
    captured = [r | {"headers": [{"key": "h", "value": str(r["offset"])}]} for r in items.take()]
    files = {fmt: _write(tmp_path / f"{fmt}.jsonl", [to(r) for r in captured]) for fmt, to in FORMATS.items()}

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in frame.orderBy("topic", "partition", "offset").collect())

    reference = ReplayRecordSource(spark, [files["capture"]])
    expected = rows(reference._frame)
    assert len(expected) == len(captured) and reference.infer()["topic_prefix"] == "fmts"
    for fmt in ("headers-object", "kcat"):
        source = ReplayRecordSource(spark, [files[fmt]])
        assert rows(source._frame) == expected, fmt
        assert source.infer() == reference.infer(), fmt
        assert source.watermarks() == reference.watermarks(), fmt
        assert rows(read_jsonl(spark, files[fmt])) == rows(read_jsonl(spark, files["capture"])), fmt
