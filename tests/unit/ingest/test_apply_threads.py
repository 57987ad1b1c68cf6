"""A batch's tables applied at once (``CDC_APPLY_THREADS``), each commit with its own table's properties."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from cdclake.ingest import tables
from cdclake.ingest.batch import apply as batch_apply
from cdclake.lake.commits import sql_committing

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
    monkeypatch.setattr(tables, "ONE_MERGE_MAX_ROWS", 0)  # stock written as a larger batch is: a MERGE, an append
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


def test_statements_of_two_threads_commit_each_with_its_own_properties_at_once(
    spark: SparkSession, prefix: str
) -> None:
    """Each thread's commits carry its own properties (Iceberg's per-thread commit properties, not the session's
    settings): neither waits for the other, and a commit after them carries none."""
    names = {t: f"lake.{prefix}.inventory.props_{t}" for t in ("a", "b")}
    for name in names.values():
        spark.sql(f"CREATE TABLE {name} (id INT) USING iceberg")
    both = threading.Barrier(2, timeout=30)
    failures: list[BaseException] = []

    def commits(thread: str) -> None:
        try:
            both.wait()  # both threads commit at the same time
            for i in range(4):
                sql_committing(spark, f"INSERT INTO {names[thread]} VALUES ({i})", {"cdc.test-thread": f"{thread}{i}"})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=commits, args=(t,)) for t in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures
    for thread, name in names.items():
        assert [s.get("cdc.test-thread") for _, s in _summaries(spark, name, 0)] == [f"{thread}{i}" for i in range(4)]
    spark.sql(f"INSERT INTO {names['a']} VALUES (9)")
    assert "cdc.test-thread" not in _summaries(spark, names["a"], 4)[0][1]


def test_a_failed_statement_raises_its_own_error_and_leaves_no_properties(spark: SparkSession, prefix: str) -> None:
    name = f"lake.{prefix}.inventory.props_failed"
    spark.sql(f"CREATE TABLE {name} (id INT) USING iceberg")
    with pytest.raises(AnalysisException, match="no_such_column"):
        sql_committing(spark, f"INSERT INTO {name} SELECT no_such_column", {"cdc.test-thread": "failed"})
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    [(_, summary)] = _summaries(spark, name, 0)
    assert "cdc.test-thread" not in summary
