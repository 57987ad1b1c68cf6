"""Schema consistency checks over a real MariaDB DDL sequence (tests/fixtures/captures/make_ddl_capture.py).

The capture (prefix ``capddl``) holds a table going through ADD d, DROP c, RENAME a -> a2, MODIFY b
BIGINT and MODIFY a2 INT (string -> int, incompatible), with DML after each step. It is replayed twice
into the session lake under fresh prefixes: in small batches (``max_records=15``, so the DDLs fall in
different batches) and in one batch. Each replay runs once per module (Spark work is slow).

Real Debezium behaviour pinned here (differs from what one might expect):

* the snapshot writes ``DROP TABLE IF EXISTS`` + ``CREATE TABLE`` for *every* table of the database
  (not only the captured one) to the schema change topic, so they are audited as ``source_drop`` /
  ``source_create`` rows;
* the ALTER's DDL text is the statement as issued (unqualified ``ALTER TABLE ddl_seq ...``);
  the table id comes from ``tableChanges``;
* each DDL opens a transaction (BEGIN on the transaction topic) that never gets an END.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.runner import replay_files

pytestmark = pytest.mark.spark

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"
CAPTURE = CAPTURES / "mariadb_ddl_sequence.jsonl"
DB = json.loads((CAPTURES / "mariadb_ddl_sequence.rows.json").read_text())
STEPS = {s["step"]: s for s in DB["steps"]}
ALTERS = [
    "ALTER TABLE ddl_seq ADD COLUMN d VARCHAR(10)",
    "ALTER TABLE ddl_seq DROP COLUMN c",
    "ALTER TABLE ddl_seq RENAME COLUMN a TO a2",
    "ALTER TABLE ddl_seq MODIFY b BIGINT",
    "ALTER TABLE ddl_seq MODIFY a2 INT",
]


def _ddl_positions() -> dict[str, int]:
    """DDL text -> binlog position, from the schema change topic of the capture."""
    out = {}
    for line in CAPTURE.read_text().splitlines():
        rec = json.loads(line)
        if rec["topic"] == "capddl" and rec["value"]:
            payload = json.loads(rec["value"])["payload"]
            out[payload["ddl"]] = int(payload["source"]["pos"])
    return out


class Replay:
    def __init__(self, spark: SparkSession, prefix: str, summary: dict[str, Any]) -> None:
        self.spark, self.prefix, self.last = spark, prefix, summary
        self.table = f"lake.{prefix}.demo.ddl_seq"

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.spark.sql(query.format(p=self.prefix)).collect()]

    def audit(self) -> list[tuple[Any, ...]]:
        return self.sql(
            "SELECT batch_id, `table`, kind, detail, ddl, position FROM lake.cdc_audit.schema_changes "
            "WHERE source = '{p}' ORDER BY batch_id"
        )

    def batches(self) -> list[dict[str, Any]]:
        return [
            json.loads(s)
            for (s,) in self.sql(
                "SELECT summary FROM lake.cdc_audit.batches WHERE source = '{p}' AND status = 'committed' ORDER BY seq"
            )
        ]

    def dead_letters(self) -> list[tuple[Any, ...]]:
        if not self.spark.catalog.tableExists("lake.cdc_audit.dead_letters"):
            return []
        return self.sql(
            "SELECT `offset`, reason FROM lake.cdc_audit.dead_letters WHERE source = '{p}' ORDER BY `offset`"
        )

    def rows(self, columns: list[str]) -> list[dict[str, Any]]:
        cols = ", ".join(f"`{c}`" for c in columns)
        return [r.asDict() for r in self.spark.sql(f"SELECT {cols} FROM {self.table} ORDER BY id").collect()]


def _replay(spark: SparkSession, tmp: Path, max_records: int | None) -> Replay:
    prefix = f"ddl{uuid.uuid4().hex[:6]}"
    # the prefix is in topics, schema names and source.name: rename it everywhere ("capddl" is nothing else)
    path = tmp / f"{prefix}.jsonl"
    path.write_text(CAPTURE.read_text().replace("capddl", prefix))
    summary = replay_files(spark, [path], topic_prefix=prefix, max_records=max_records)
    return Replay(spark, prefix, summary.as_dict())


@pytest.fixture(scope="module")
def batched(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    return _replay(spark, tmp_path_factory.mktemp("ddl-batched"), max_records=15)


@pytest.fixture(scope="module")
def single(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    return _replay(spark, tmp_path_factory.mktemp("ddl-single"), max_records=None)


def _db_rows(step: str) -> list[dict[str, Any]]:
    return STEPS[step]["rows"]


def _db_columns(step: str) -> list[str]:
    return [c.split()[0] for c in STEPS[step]["columns"]]


# -- both replays -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["batched", "single"])
def test_every_table_ddl_is_audited_with_text_and_position(which: str, request: pytest.FixtureRequest) -> None:
    replay: Replay = request.getfixturevalue(which)
    positions = _ddl_positions()
    alters = [r for r in replay.audit() if r[2] == "source_alter"]
    assert [r[4] for r in alters] == ALTERS
    for _, table, _, detail, ddl, position in alters:
        assert table == "demo.ddl_seq"
        pos = json.loads(position)
        # _cdc_position of the schema change event: [binlog file, pos, row, rank, partition, offset]
        assert pos[1] == positions[ddl]
        assert json.loads(detail)  # the resulting column list
    details = {r[4]: json.loads(r[3]) for r in alters}
    assert details["ALTER TABLE ddl_seq RENAME COLUMN a TO a2"] == ["id INT", "a2 VARCHAR", "b INT", "d VARCHAR"]
    assert details["ALTER TABLE ddl_seq MODIFY a2 INT"] == ["id INT", "a2 INT", "b BIGINT", "d VARCHAR"]
    # Debezium: the snapshot records DROP + CREATE of every table of the database, captured or not
    creates = {r[1] for r in replay.audit() if r[2] == "source_create"}
    assert {"demo.ddl_seq", "demo.all_types", "demo.customers", "demo.orders"} <= creates


# -- small batches: DDLs in different batches -------------------------------------------------------------------


def test_batched_lake_evolutions_are_recorded(batched: Replay) -> None:
    assert len({r[0] for r in batched.audit() if r[2] == "source_alter"}) >= 3  # the DDLs span batches
    evolutions = [r[3] for r in batched.audit() if r[2] == "lake_evolution"]
    assert f"created {batched.table}" in evolutions
    assert "add_column d: - -> STRING" in evolutions
    assert "column_missing_in_source c: INT -> -" in evolutions
    # a rename under `evolve` is a new column plus a missing one (the old values stay in `a`)
    assert "add_column a2: - -> STRING" in evolutions
    assert "column_missing_in_source a: STRING -> -" in evolutions
    assert "widen_column b: INT -> BIGINT" in evolutions
    # each evolution is recorded once per batch that sees it (the missing columns a and c are
    # re-recorded by every later batch of the table)
    assert evolutions.count("add_column d: - -> STRING") == 1
    assert evolutions.count("widen_column b: INT -> BIGINT") == 1


def test_batched_incompatible_change_quarantines_the_table(batched: Replay) -> None:
    reason = f"{batched.table}: cannot evolve (evolve): incompatible_type_change a2: STRING -> INT"
    quarantined = [r for r in batched.audit() if r[2] == "quarantined"]
    # batch boundaries depend on when the big a2 UPDATE transaction expires: one or more batches
    # quarantine the table (a quarantined table stays quarantined for later batches of its events)
    assert quarantined and {r[3] for r in quarantined} == {reason}
    held = batched.sql("SELECT `offset`, reason FROM lake.cdc_audit.quarantine WHERE source = '{p}' ORDER BY `offset`")
    # at least the two events after MODIFY a2 INT (insert id 9, update id 1)
    assert {21, 22} <= {r[0] for r in held} and {r[1] for r in held} == {reason}
    summaries = batched.batches()
    last_with_table = [s for s in summaries if s["tables"]][-1]
    assert f"{batched.table}: quarantined: {reason}" in last_with_table["checks"]["problems"]


def test_batched_lake_rows_before_the_incompatible_step_match_the_db(batched: Replay) -> None:
    # every event before MODIFY a2 INT is applied (none dead-lettered), nothing after it
    assert batched.dead_letters() == []
    assert batched.rows(_db_columns("numeric_a2")) == _db_rows("numeric_a2")
    assert max(r["b"] for r in batched.rows(["b"])) == 4294967296  # > 2^31 after the widening


# A DDL is only compared with events when that is conclusive (schema topic read to its end, DDL before
# every event of the table in the batch): capped batches read topics at different rates.
def test_batched_agreeing_ddls_report_no_mismatch(batched: Replay) -> None:
    problems = [p for s in batched.batches() for p in s["checks"]["problems"] if "DDL" in p]
    assert problems == []


# -- one batch --------------------------------------------------------------------------------------------------


def test_single_batch_cuts_at_the_incompatible_change_then_quarantines(single: Replay) -> None:
    # One range holds a2 as a string (offsets 9..20) and, after MODIFY a2 INT, as int32 (21, 22). The
    # decoder decodes the string era and cuts the topic at the first int32 event; the batch applies what
    # is before the cut and commits the offsets up to it; the next batch starts at the new schema, which
    # cannot evolve the table (STRING -> INT) and quarantines it, holding 21 and 22.
    summaries = single.batches()
    cut = [s["schema_cuts"] for s in summaries if s.get("schema_cuts")]
    assert cut and "column a2: string -> int" in next(iter(cut[0].values()))
    assert single.dead_letters() == []
    assert single.rows(_db_columns("numeric_a2")) == _db_rows("numeric_a2")
    reason = f"{single.table}: cannot evolve (evolve): incompatible_type_change a2: STRING -> INT"
    held = single.sql("SELECT `offset`, reason FROM lake.cdc_audit.quarantine WHERE source = '{p}' ORDER BY `offset`")
    assert {r[0] for r in held} == {21, 22} and {r[1] for r in held} == {reason}
