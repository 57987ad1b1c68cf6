"""A batch's tables applied at once (``CDC_APPLY_THREADS``), each commit with its own table's properties."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest import tables
from cdclake.ingest.batch import apply as batch_apply

from .conftest import RunBatch, rows
from .events import PgTable

pytestmark = pytest.mark.spark


def _summaries(spark: SparkSession, name: str, since: int) -> list[tuple[str, dict[str, str]]]:
    snaps = spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at, snapshot_id").collect()
    return [(s["operation"], dict(s["summary"])) for s in snaps[since:]]


def _two_tables(prefix: str) -> tuple[PgTable, PgTable]:
    """Two captured tables of one source, a row created in each."""
    items, stock = PgTable(prefix=prefix, table="items"), PgTable(prefix=prefix, table="stock")
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    stock.create({"id": 1, "name": "s", "qty": 5}, lsn=101)
    return items, stock


def test_two_tables_are_applied_at_once_and_each_commit_carries_its_own_properties(
    spark: SparkSession, prefix: str, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    items, stock = _two_tables(prefix)
    ingest(items.take(), stock.take())
    names = {t: f"lake.{prefix}.inventory.{t}" for t in ("items", "stock")}
    before = {t: spark.sql(f"SELECT count(*) FROM {n}.snapshots").collect()[0][0] for t, n in names.items()}

    # both tables must be in their apply at the same time: applied one after the other, the first one waits
    # here for the second until the barrier's timeout breaks it
    both = threading.Barrier(2, timeout=30)
    apply_table = batch_apply._apply_table

    def together(*args: Any, **kwargs: Any) -> Any:
        both.wait()
        return apply_table(*args, **kwargs)

    monkeypatch.setattr(batch_apply, "_apply_table", together)
    items.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)  # a stored key only: one MERGE, the batch's commit
    stock.update({"id": 1, "name": "s2", "qty": 6}, lsn=201)  # a stored key: a MERGE, the first of two commits
    stock.create({"id": 2, "name": "t", "qty": 7}, lsn=202)  # a new key: the append, the batch's commit
    summary = ingest(items.take(), stock.take())
    monkeypatch.undo()

    assert summary.status == "committed"
    assert rows(spark, prefix, "items") == [(1, "a2", 2)]
    assert rows(spark, prefix, "stock") == [(1, "s2", 6), (2, "t", 7)]
    # the MERGE carrying the batch's properties and the one marked partial ran in threads of one session, whose
    # settings carry a commit's properties: neither took the other's
    [(op, merged)] = _summaries(spark, names["items"], before["items"])
    assert op == "overwrite" and merged["cdc.batch-id"] == summary.batch_id and "cdc.partial-of" not in merged
    [(op1, partial), (op2, appended)] = _summaries(spark, names["stock"], before["stock"])
    assert op1 == "overwrite" and partial["cdc.partial-of"] == summary.batch_id and "cdc.batch-id" not in partial
    assert op2 == "append" and appended["cdc.batch-id"] == summary.batch_id and "cdc.partial-of" not in appended
    assert list(summary.tables) == sorted(names.values())  # reported in name order, whichever finished first


def test_one_thread_applies_the_tables_one_after_another(
    spark: SparkSession, prefix: str, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    items, stock = _two_tables(prefix)
    monkeypatch.setenv("CDC_APPLY_THREADS", "1")
    running: list[str] = []
    overlapped: list[bool] = []
    apply_table = batch_apply._apply_table

    def alone(ctx: Any, plan: Any, applier: Any, *args: Any, **kwargs: Any) -> Any:
        overlapped.append(bool(running))
        running.append(applier.identifier)
        try:
            return apply_table(ctx, plan, applier, *args, **kwargs)
        finally:
            running.remove(applier.identifier)

    monkeypatch.setattr(batch_apply, "_apply_table", alone)
    summary = ingest(items.take(), stock.take())
    assert summary.status == "committed" and overlapped == [False, False]
    assert rows(spark, prefix, "items") == [(1, "a", 1)] and rows(spark, prefix, "stock") == [(1, "s", 5)]


def test_blocks_with_commit_properties_run_one_at_a_time(spark: SparkSession) -> None:
    """Two threads' commit properties never mix: a second block waits until the first has put its settings back."""
    key = tables.SNAPSHOT_PROPERTY
    inside, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def first() -> None:
        with tables.snapshot_properties(spark, {"cdc.test-first": "1"}):
            inside.set()
            release.wait(60)

    def second() -> None:
        with tables.snapshot_properties(spark, {"cdc.test-second": "2"}):
            seen["first"] = spark.conf.get(key + "cdc.test-first", None)
            seen["second"] = spark.conf.get(key + "cdc.test-second", None)

    one = threading.Thread(target=first)
    one.start()
    assert inside.wait(60)
    two = threading.Thread(target=second)
    two.start()
    two.join(1.0)
    assert two.is_alive() and not seen  # waits while the first block holds the session's settings
    release.set()
    one.join(60)
    two.join(60)
    assert seen == {"first": None, "second": "2"}
    assert spark.conf.get(key + "cdc.test-second", None) is None
