"""A follower compacts the tables it writes and keeps them to their newest snapshots
(:class:`cdclake.ingest.follow.TableUpkeep`): on real tables of the session's embedded lake, written by Spark as a
batch writes them, and their tombstones."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from driver_failures import exhaust_the_driver_heap
from pyspark.sql import SparkSession

from cdclake.ingest.follow import TableUpkeep
from cdclake.ingest.summary import BatchSummary
from cdclake.lake import rows as lake_rows
from cdclake.lake.maintenance import compact_recent_files
from cdclake.lake.names import catalog_identifier, tombstone_identifier


def test_a_table_is_compacted_every_nth_batch_and_tidied_after_its_first_then_every_mth() -> None:
    upkeep = TableUpkeep(None, keep=5, compact_every=4, tidy_every=3)  # type: ignore[arg-type]
    a, a_deletes = "lake.pg.a", "lake.pg.a__cdc_deletes"
    due = [upkeep.due(a) for _ in range(8)]
    assert [compact for compact, _ in due] == [[], [], [a_deletes], [a], [], [], [a_deletes], [a]]
    assert [bool(tidy) for _, tidy in due] == [True, False, False, True, False, False, True, False]
    assert due[0][1] == [a, a_deletes]
    # each table counts its own batches; the tables met later are compacted earlier in the cycle
    b, b_deletes = "lake.pg.b", "lake.pg.b__cdc_deletes"
    assert [upkeep.due(b)[0] for _ in range(4)] == [[b_deletes], [b], [], []]
    assert TableUpkeep(None, keep=None, compact_every=None).due(a) == ([], [])  # type: ignore[arg-type]


def test_an_append_or_scd2_table_has_no_tombstones_to_upkeep() -> None:
    upkeep = TableUpkeep(None, keep=5, compact_every=2)  # type: ignore[arg-type]
    assert upkeep.due("lake.pg.log", "append") == ([], ["lake.pg.log"])
    assert upkeep.due("lake.pg.log", "append") == (["lake.pg.log"], [])
    assert upkeep.due("lake.pg.history", "scd2") == (["lake.pg.history"], ["lake.pg.history"])


def _summary(tables: dict[str, dict[str, int]], mode: str = "upsert") -> BatchSummary:
    return BatchSummary(
        source="pg",
        batch_id="b1",
        status="committed",
        tables={
            name: {"mode": mode, "events": events, "applied": sum(events.values())} for name, events in tables.items()
        },
    )


@pytest.mark.spark
def test_the_tables_a_batch_wrote_keep_their_newest_snapshots_and_all_their_rows(spark: SparkSession) -> None:
    namespace = f"lake.tidy{uuid.uuid4().hex[:6]}.inventory"
    table, untouched = f"{namespace}.customers", f"{namespace}.orders"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    for name in (table, tombstone_identifier(table), untouched):
        spark.sql(f"CREATE TABLE {name} (id BIGINT, name STRING) USING iceberg PARTITIONED BY (bucket(4, id))")
        for i in range(8):
            spark.sql(f"INSERT INTO {name} VALUES ({i}, 'n{i}')")
    spark.sql(f"DELETE FROM {table} WHERE id = 3")  # a commit that writes deletes, as a MERGE does
    upkeep = TableUpkeep(spark, keep=3)

    assert upkeep.after(_summary({table: {"c": 1}, untouched: {}})) == {"compacted": 0, "expired": 6 + 5}
    for name, kept in ((table, 3), (tombstone_identifier(table), 3), (untouched, 8)):
        loaded = lake_rows.load(spark, name)
        assert loaded is not None and len(loaded.metadata.snapshots) == kept, name
    # Spark reads the tidied table as it is, and writes on from it
    assert sorted(r.id for r in spark.table(table).collect()) == [0, 1, 2, 4, 5, 6, 7]
    spark.sql(f"INSERT INTO {table} VALUES (8, 'n8')")
    assert spark.table(table).count() == 8
    # not due again before its 100th batch: nothing more is expired
    assert upkeep.after(_summary({table: {"u": 2}})) == {"compacted": 0, "expired": 0}


def _with_small_files(spark: SparkSession, name: str) -> None:
    """Table ``name`` with six batches' small files (ids 0-5)."""
    spark.sql(f"CREATE TABLE {name} (id BIGINT, name STRING) USING iceberg")
    for i in range(6):
        spark.sql(f"INSERT INTO {name} VALUES ({i}, 'n{i}')")


@pytest.mark.spark
def test_the_tables_a_batch_wrote_are_compacted_every_nth_batch_with_all_their_rows(spark: SparkSession) -> None:
    namespace = f"lake.compact{uuid.uuid4().hex[:6]}.inventory"
    table = f"{namespace}.customers"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    for name in (table, tombstone_identifier(table)):
        _with_small_files(spark, name)
    upkeep = TableUpkeep(spark, keep=None, compact_every=2)

    assert upkeep.after(_summary({table: {"c": 1}})) == {"compacted": 1, "expired": 0}  # the tombstones
    assert spark.sql(f"SELECT count(*) FROM {table}.files").first()[0] == 6
    assert upkeep.after(_summary({table: {"c": 1}})) == {"compacted": 1, "expired": 0}  # the table
    for name in (table, tombstone_identifier(table)):
        assert spark.sql(f"SELECT count(*) FROM {name}.files").first()[0] == 1, name
        assert sorted(r.id for r in spark.table(name).collect()) == list(range(6)), name
    # due again, with nothing new to rewrite: not counted
    for _ in range(2):
        assert upkeep.after(_summary({table: {"c": 1}})) == {"compacted": 0, "expired": 0}


@pytest.mark.spark
def test_an_append_table_is_compacted_without_tombstones(spark: SparkSession) -> None:
    namespace = f"lake.compact{uuid.uuid4().hex[:6]}.inventory"
    table = f"{namespace}.events_log"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    _with_small_files(spark, table)
    upkeep = TableUpkeep(spark, keep=None, compact_every=1)

    assert upkeep.after(_summary({table: {"c": 1}}, mode="append")) == {"compacted": 1, "expired": 0}
    assert spark.sql(f"SELECT count(*) FROM {table}.files").first()[0] == 1
    assert sorted(r.id for r in spark.table(table).collect()) == list(range(6))
    assert not spark.catalog.tableExists(tombstone_identifier(table))
    assert list(compact_recent_files(spark, table, deletes=False)) == ["rewrite_data_files"]  # what it ran


@pytest.mark.spark
def test_the_audit_tables_are_compacted_every_nth_batch_of_the_follower(spark: SparkSession) -> None:
    ledger_like = f"lake.cdc_audit.upkeep{uuid.uuid4().hex[:6]}"  # beside the session lake's own audit tables
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.cdc_audit")
    spark.sql(f"CREATE TABLE {ledger_like} (source STRING, seq BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {ledger_like} VALUES ('pg', 0)")  # the session caches the table
    table = lake_rows.session_catalog(spark).load_table(catalog_identifier(ledger_like))
    for i in range(1, 6):  # five batches' appends through pyiceberg, as the ledger's, unseen by the session
        table.append(pa.table({"source": ["pg"], "seq": [i]}, schema=table.schema().as_arrow()))
    upkeep = TableUpkeep(spark, keep=None, compact_every=10, audit_every=2)

    assert upkeep.after(_summary({})) == {"compacted": 0, "expired": 0}
    assert upkeep.after(_summary({}))["compacted"] >= 1
    assert spark.sql(f"SELECT count(*) FROM {ledger_like}.files").first()[0] == 1
    assert sorted(r.seq for r in spark.table(ledger_like).collect()) == list(range(6))
    # compaction off: the audit tables are left to the maintenance too
    for i in range(6):
        spark.sql(f"INSERT INTO {ledger_like} VALUES ('pg', {i})")
    off = TableUpkeep(spark, keep=None, compact_every=None, audit_every=1)
    assert off.after(_summary({})) == {"compacted": 0, "expired": 0}
    assert spark.sql(f"SELECT count(*) FROM {ledger_like}.files").first()[0] == 7


def test_a_driver_out_of_memory_in_the_upkeep_stops_the_follower_saying_what_to_change(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.exceptions import SparkDriverError
    from cdclake.lake import maintenance

    monkeypatch.setattr(maintenance, "compact_recent_files", lambda *args, **kwargs: exhaust_the_driver_heap(spark))
    with pytest.raises(SparkDriverError) as stopped:
        TableUpkeep(spark, keep=None, compact_every=1)._compact("lake.any.table", deletes=True)
    message = str(stopped.value)
    assert message.startswith("table lake.any.table: the Spark driver ran out of memory (java.lang.OutOfMemoryError")
    assert "follower's compaction" in message and "CDC_SPARK_DRIVER_MEMORY" in message

    def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a procedure's own error")

    monkeypatch.setattr(maintenance, "compact_recent_files", fails)  # any other failure is left for later
    assert TableUpkeep(spark, keep=None, compact_every=1)._compact("lake.any.table", deletes=True) is False
