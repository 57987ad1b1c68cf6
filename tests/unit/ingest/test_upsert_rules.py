"""Upsert semantics end to end: hand-built Debezium records -> real decoder -> MERGE into the session lake."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest import tables

from .conftest import RunBatch, rows
from .events import PgTable

pytestmark = pytest.mark.spark


def test_insert_update_delete_reinsert_in_one_batch(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.update({"id": 1, "name": "b", "qty": 2}, lsn=110)
    table.delete({"id": 1}, lsn=120)
    table.create({"id": 1, "name": "c", "qty": 3}, lsn=130)
    table.create({"id": 2, "name": "x", "qty": 9}, lsn=140)
    table.delete({"id": 2}, lsn=150)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, "c", 3)]
    result = summary.tables[f"lake.{prefix}.inventory.items"]
    assert result["events"] == {"c": 3, "u": 1, "d": 2}
    assert result["applied"] == 2  # latest per key: id 1 -> c@130, id 2 -> d@150
    assert summary.counts["tombstones"] == 2
    # one schema version, sampled at the range's points from the cached records: no discovery pass
    assert summary.discovery == "sample"


@pytest.mark.parametrize("local_rows", [10_000, 0], ids=["local-merge-sources", "cached-merge-sources"])
def test_across_batches_and_a_late_older_event_does_not_resurrect_a_delete(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch, local_rows: int
) -> None:
    # the marked events and the MERGEs' sources as local relations (small batches), or checkpointed, cached and
    # counted
    monkeypatch.setattr(tables, "LOCAL_SOURCE_MAX_ROWS", local_rows)
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    ingest(table.take())
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)
    ingest(table.take())
    table.delete({"id": 1}, lsn=300)
    ingest(table.take())
    assert rows(spark, prefix) == [(2, "b", 1)]
    # a redelivered, older update of the deleted key (position 200 < delete at 300) arrives late
    table.update({"id": 1, "name": "zombie", "qty": 7}, lsn=200)
    # and an older update of a live row
    table.update({"id": 2, "name": "old", "qty": 0}, lsn=50)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(2, "b", 1)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["skipped"] == 2
    assert _tombstones(spark, prefix) == [(1, 300)]
    # a genuinely newer insert of the deleted key is applied
    table.create({"id": 1, "name": "back", "qty": 5}, lsn=400)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "back", 5), (2, "b", 1)]
    # deleted again: its tombstone advances (a MERGE), and decides what is stale; in the same batch a key
    # deleted for the first time gets its first tombstone (an append)
    table.create({"id": 3, "name": "c", "qty": 1}, lsn=490)
    table.delete({"id": 1}, lsn=500)
    table.delete({"id": 2}, lsn=501)
    ingest(table.take())
    assert _tombstones(spark, prefix) == [(1, 500), (2, 501)]
    table.update({"id": 1, "name": "late", "qty": 8}, lsn=450)
    # the key's delete once more, at a later Kafka offset (so a newer position): its tombstone is advanced, not
    # doubled
    table.delete({"id": 2}, lsn=501)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(3, "c", 1)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["skipped"] == 1
    assert _tombstones(spark, prefix) == [(1, 500), (2, 501)]


def _tombstones(spark: SparkSession, prefix: str) -> list[tuple[int, int]]:
    """The items table's delete tombstones: ``(id, first position component)``, by id."""
    tombs = spark.sql(
        f"SELECT id, _cdc_position[0] FROM lake.{prefix}.inventory.items__cdc_deletes ORDER BY id, _cdc_position"
    ).collect()
    return [(r[0], int(r[1])) for r in tombs]


def test_reordered_duplicates_keep_the_greatest_position(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    table.update({"id": 1, "name": "newest", "qty": 3}, lsn=300)
    table.create({"id": 1, "name": "first", "qty": 1}, lsn=100)
    table.update({"id": 1, "name": "middle", "qty": 2}, lsn=200)
    table.update({"id": 1, "name": "newest", "qty": 3}, lsn=300)  # duplicate delivery
    table.update({"id": 1, "name": "middle", "qty": 2}, lsn=200)  # duplicate, out of order
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "newest", 3)]
    positions = spark.sql(f"SELECT _cdc_position FROM lake.{prefix}.inventory.items").collect()[0][0]
    assert int(positions[0]) == 300


def test_snapshot_read_never_wins_over_a_later_streamed_change(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    # the stream changed the row at LSN 500; an incremental-snapshot read of the same key carries the
    # same stream position and is delivered after it: the streamed value must stay
    table.update({"id": 1, "name": "streamed", "qty": 2}, lsn=500)
    table.read({"id": 1, "name": "snapshot", "qty": 1}, lsn=500, snapshot="incremental")
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "streamed", 2)]
    # an initial-snapshot row followed by streaming
    table.read({"id": 2, "name": "snap", "qty": 1}, lsn=10, snapshot="last")
    table.update({"id": 2, "name": "stream", "qty": 2}, lsn=600)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "streamed", 2), (2, "stream", 2)]


def test_primary_key_change_moves_the_row(spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take())
    table.move_key({"id": 1, "name": "a", "qty": 1}, {"id": 7, "name": "a", "qty": 1}, lsn=200)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(7, "a", 1)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["events"] == {"d": 1, "c": 1}


def test_truncate_removes_older_rows_and_later_events_apply(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=110)
    ingest(table.take())
    table.create({"id": 3, "name": "c", "qty": 1}, lsn=150)
    table.truncate(lsn=200)
    table.create({"id": 4, "name": "d", "qty": 1}, lsn=210)
    ingest(table.take())
    assert rows(spark, prefix) == [(4, "d", 1)]
    table.update({"id": 2, "name": "late", "qty": 9}, lsn=190)  # older than the truncate
    ingest(table.take())
    assert rows(spark, prefix) == [(4, "d", 1)]


def test_rerunning_the_same_records_changes_nothing(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.update({"id": 1, "name": "b", "qty": 2}, lsn=110)
    first = ingest(table.take())
    snapshots = spark.sql(f"SELECT count(*) FROM lake.{prefix}.inventory.items.snapshots").collect()[0][0]
    again = ingest([])  # same log, nothing new
    assert again.batch_id is None and again.status == "no-new-records"
    assert spark.sql(f"SELECT count(*) FROM lake.{prefix}.inventory.items.snapshots").collect()[0][0] == snapshots
    assert rows(spark, prefix) == [(1, "b", 2)]
    summary = spark.sql(
        f"SELECT summary FROM lake.{prefix}.inventory.items.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0][0]
    assert summary["cdc.batch-id"] == first.batch_id
    assert json.loads(summary["cdc.offsets"]) == {f"{prefix}.inventory.items": {"0": [0, 2]}}
    assert summary["cdc.watermark"].startswith("[110")


def _two_rows_stored(spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch) -> tuple[str, int]:
    """Ingest rows 1 and 2; the table's name and its count of snapshots after them."""
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    ingest(table.take())
    name = f"lake.{prefix}.inventory.items"
    return name, spark.sql(f"SELECT count(*) FROM {name}.snapshots").collect()[0][0]


def test_stored_keys_are_merged_new_keys_appended_and_a_redo_after_the_merge_finishes_the_batch(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "ONE_MERGE_MAX_ROWS", 0)  # written as a larger batch is: a MERGE, then an append
    name, before = _two_rows_stored(spark, prefix, table, ingest)
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)  # stored key: MERGE
    table.delete({"id": 2}, lsn=201)  # stored key: MERGE
    table.create({"id": 3, "name": "c", "qty": 3}, lsn=202)  # new key: append

    def crash(point: str) -> None:  # the process dies between the table's two commits
        if point == "table-partial":
            raise SystemExit("injected crash after the MERGE commit")

    monkeypatch.setattr("cdclake.ingest.tables.crash_point", crash)
    with pytest.raises(SystemExit):
        ingest(table.take())
    assert rows(spark, prefix) == [(1, "a2", 2)]  # the MERGE committed, the append did not
    monkeypatch.setattr("cdclake.ingest.tables.crash_point", lambda point: None)

    redo = ingest([])  # the interrupted batch is redone with its own ranges and id
    assert redo.redo
    assert rows(spark, prefix) == [(1, "a2", 2), (3, "c", 3)]
    result = redo.tables[name]
    assert result["applied_by_op"] == {"c": 1}
    assert result["skipped_by_op"] == {"u": 1, "d": 1}  # already committed at their own positions
    snaps = spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at, snapshot_id").collect()[
        before:
    ]
    partial = [s for s in snaps if "cdc.partial-of" in s["summary"]]
    assert [s["summary"]["cdc.partial-of"] for s in partial] == [redo.batch_id]
    assert "cdc.batch-id" not in partial[0]["summary"]
    assert snaps[-1]["operation"] == "append" and snaps[-1]["summary"]["cdc.batch-id"] == redo.batch_id
    assert ingest([]).status == "no-new-records"


def test_a_merge_source_is_broadcast_up_to_a_share_of_the_driver_heap() -> None:
    # the driver builds a broadcast in its heap: at the default 900m (800 MiB to the JVM) a source of 91 MiB failed
    assert tables.broadcast_max_bytes(800 * 2**20) == 50 * 2**20
    assert tables.broadcast_max_bytes(1820 * 2**20) == 1820 * 2**20 // 16
    assert tables.broadcast_max_bytes(16 * 2**30) == tables.BROADCAST_SOURCE_MAX_BYTES == 256 * 2**20


@pytest.mark.parametrize("heap_share", [16, 2**40])
def test_a_merge_source_above_the_heap_share_is_joined_by_sort_merge_not_broadcast(
    spark: SparkSession,
    prefix: str,
    table: PgTable,
    ingest: RunBatch,
    monkeypatch: pytest.MonkeyPatch,
    heap_share: int,
) -> None:
    # a MERGE of stored keys whose source is cached and counted (as a batch of more than LOCAL_SOURCE_MAX_ROWS is):
    # broadcast while the planner estimates it within the driver's heap share (a few rows: at 1/16), else joined
    # by sort-merge (a share of 2^40 allows no byte); the same rows either way
    from cdclake.spark import driver_max_heap

    monkeypatch.setattr(tables, "ONE_MERGE_MAX_ROWS", 0)
    monkeypatch.setattr(tables, "LOCAL_SOURCE_MAX_ROWS", 0)
    monkeypatch.setattr(tables, "BROADCAST_HEAP_SHARE", heap_share)
    plans: list[tuple[str, str]] = []
    committing = tables.sql_committing

    def explained(spark: SparkSession, sql: str, props: dict[str, str]) -> None:
        threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
        plans.append((threshold, spark.sql(f"EXPLAIN {sql}").collect()[0][0]))
        committing(spark, sql, props)

    monkeypatch.setattr(tables, "sql_committing", explained)
    _two_rows_stored(spark, prefix, table, ingest)
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)
    table.delete({"id": 2}, lsn=201)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "a2", 2)]
    [(threshold, plan)] = plans  # the MERGE of the two stored keys (the first batch appended, as did the tombstone)
    # the heap the JVM reports moves by a few MB as the collector resizes its survivor spaces
    expected = tables.broadcast_max_bytes(driver_max_heap(spark))
    assert abs(int(threshold) - expected) <= expected // 10 and int(threshold) < tables.BROADCAST_SOURCE_MAX_BYTES
    assert ("SortMergeJoin" in plan) == (heap_share == 2**40) and ("BroadcastHashJoin" in plan) == (heap_share == 16)


def test_a_small_batch_of_stored_and_new_keys_is_written_in_one_merge(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    name, before = _two_rows_stored(spark, prefix, table, ingest)
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)  # stored key: updated
    table.delete({"id": 2}, lsn=201)  # stored key: deleted
    table.create({"id": 3, "name": "c", "qty": 3}, lsn=202)  # new key: inserted
    table.create({"id": 4, "name": "d", "qty": 4}, lsn=203)  # new key, deleted in the batch: a tombstone only
    table.delete({"id": 4}, lsn=204)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, "a2", 2), (3, "c", 3)]
    assert _tombstones(spark, prefix) == [(2, 201), (4, 204)]
    result = summary.tables[name]
    assert result["applied_by_op"] == {"u": 1, "d": 2, "c": 1}
    snaps = spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at, snapshot_id").collect()[
        before:
    ]
    assert [s["operation"] for s in snaps] == ["overwrite"]  # one commit: the MERGE's inserts are in it
    merged = snaps[0]["summary"]
    assert merged["cdc.batch-id"] == summary.batch_id and "cdc.partial-of" not in merged
    assert (merged["added-records"], merged["added-position-deletes"]) == ("2", "2")  # rows 1 and 3; 1 and 2 removed


def test_a_redo_after_the_tombstones_committed_still_deletes_the_row(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tombstones and the table commit apart: a crash between them leaves the delete's tombstone at the
    event's own position and the row still stored; the redo must not take the delete for an old one."""
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    ingest(table.take())
    table.delete({"id": 1}, lsn=200)
    table.update({"id": 2, "name": "b2", "qty": 2}, lsn=201)

    def crash(point: str) -> None:
        if point == "tombstones":
            raise SystemExit("injected crash after the tombstones' commit")

    monkeypatch.setattr("cdclake.ingest.tables.crash_point", crash)
    with pytest.raises(SystemExit):
        ingest(table.take())
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b", 1)]  # the table's own commit never happened
    monkeypatch.undo()

    redo = ingest([])
    assert redo.redo
    assert rows(spark, prefix) == [(2, "b2", 2)]
    assert redo.tables[f"lake.{prefix}.inventory.items"]["applied_by_op"] == {"d": 1, "u": 1}
    assert _tombstones(spark, prefix) == [(1, 200)]  # the redo found the delete's tombstone and added none
    assert ingest([]).status == "no-new-records"


@pytest.mark.parametrize("narrowed_by", ["values", "listed-ranges", "ranges", "range"])
def test_stored_keys_at_the_bounds_of_a_batch_key_range_are_matched(
    spark: SparkSession,
    prefix: str,
    table: PgTable,
    ingest: RunBatch,
    monkeypatch: pytest.MonkeyPatch,
    narrowed_by: str,
) -> None:
    # the applier narrows the table's and the tombstones' scans to the batch's key values (a small batch), to
    # ranges that cover them and the values (more values), to the ranges alone (more than it lists), or to their
    # range (a batch too large to collect them): keys at the ends of each must still match, keys outside stay as
    # they are
    if narrowed_by in ("listed-ranges", "ranges"):  # two values or more: two ranges, split at the widest gap
        monkeypatch.setattr("cdclake.ingest.apply.KEY_VALUES_MAX", 1)
        monkeypatch.setattr("cdclake.ingest.apply.KEY_RANGES_MAX", 2)
    if narrowed_by == "ranges":
        monkeypatch.setattr("cdclake.ingest.apply.KEY_LIST_MAX", 1)
    elif narrowed_by == "range":
        monkeypatch.setattr("cdclake.ingest.tables.KEY_VALUES_MAX_RECORDS", 0)
    for i in range(1, 6):
        table.create({"id": i, "name": f"n{i}", "qty": i}, lsn=100 + i)
    ingest(table.take())
    table.update({"id": 2, "name": "lo", "qty": 20}, lsn=200)
    table.update({"id": 4, "name": "hi", "qty": 40}, lsn=201)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "n1", 1), (2, "lo", 20), (3, "n3", 3), (4, "hi", 40), (5, "n5", 5)]
    table.delete({"id": 2}, lsn=300)
    table.delete({"id": 4}, lsn=301)
    ingest(table.take())
    # key 4 comes back and is deleted again (its tombstone MERGEd at the range's upper end), key 3 updated
    table.create({"id": 4, "name": "back", "qty": 4}, lsn=400)
    ingest(table.take())
    table.update({"id": 3, "name": "u3", "qty": 30}, lsn=500)
    table.delete({"id": 4}, lsn=501)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, "n1", 1), (3, "u3", 30), (5, "n5", 5)]
    assert _tombstones(spark, prefix) == [(2, 300), (4, 501)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["applied"] == 2
    # a late update of key 2, older than its delete, is stale: the tombstone is found within the range (keys 1, 2
    # and 5: narrowed by ranges, 1-2 and 5-5)
    table.update({"id": 2, "name": "zombie", "qty": 0}, lsn=250)
    table.update({"id": 1, "name": "u1", "qty": 10}, lsn=600)
    table.update({"id": 5, "name": "u5", "qty": 50}, lsn=601)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, "u1", 10), (3, "u3", 30), (5, "u5", 50)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["skipped"] == 1
    assert summary.tables[f"lake.{prefix}.inventory.items"]["applied"] == 2


def test_string_keys_with_quotes_and_backslashes_bound_the_scan(
    spark: SparkSession, prefix: str, ingest: RunBatch
) -> None:
    # the key column's name is hostile too: a backtick and a dot, quoted in every scan, bound and MERGE
    key = "co`d.e"
    codes = PgTable(prefix=prefix, table="codes", columns={key: "string", "qty": "int32"}, key=(key,))
    hostile = ["a'b", "c\\d", 'e"f', "zz"]
    for i, code in enumerate(hostile):
        codes.create({key: code, "qty": i}, lsn=100 + i)
    ingest(codes.take())
    codes.update({key: "a'b", "qty": 10}, lsn=200)  # the batch's least key
    codes.update({key: "c\\d", "qty": 11}, lsn=201)  # its greatest
    codes.delete({key: "c\\d"}, lsn=202)
    ingest(codes.take())
    # deleted again after a re-insert: its tombstone advanced by the MERGE, within the bounds
    codes.create({key: "c\\d", "qty": 12}, lsn=300)
    ingest(codes.take())
    codes.delete({key: "c\\d"}, lsn=400)
    codes.update({key: 'e"f', "qty": 13}, lsn=401)
    ingest(codes.take())
    stored = spark.sql(f"SELECT `co``d.e`, qty FROM lake.{prefix}.inventory.codes ORDER BY 1").collect()
    assert [tuple(r) for r in stored] == [("a'b", 10), ('e"f', 13), ("zz", 3)]
    tombs = spark.sql(f"SELECT `co``d.e`, _cdc_position[0] FROM lake.{prefix}.inventory.codes__cdc_deletes").collect()
    assert [(r[0], int(r[1])) for r in tombs] == [("c\\d", 400)]
    # the bound as the applier writes it is pushed into Iceberg's scan (its files are pruned by their metrics)
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from cdclake.ingest import apply

    bounds = apply.key_bounds({key: "a'b"}, {key: "c\\d"}, {key: T.StringType()})
    scan = spark.table(f"lake.{prefix}.inventory.codes").where(F.expr(apply.key_range_sql(bounds)))
    plan = scan._jdf.queryExecution().executedPlan().toString()
    assert ">= 'a'b'" in plan.replace("\\", ""), plan
    assert [r[key] for r in scan.collect()] == ["a'b"]
    # so is a list of the batch's values
    bounds = apply.key_bounds({key: "a'b"}, {key: "zz"}, {key: T.StringType()}, {key: ["zz", "a'b"]})
    scan = spark.table(f"lake.{prefix}.inventory.codes").where(F.expr(apply.key_range_sql(bounds)))
    plan = scan._jdf.queryExecution().executedPlan().toString()
    # a list of two or more values is a hash set (cdclake.spark.BASE_CONF): pushed in no particular order
    pushed = re.search(r"filters=[^,]* IN \(([^)]*)\)", plan.replace("\\", ""))
    assert pushed is not None and sorted(pushed.group(1).split(", ")) == ["'a'b'", "'zz'"], plan
    assert sorted(r[key] for r in scan.collect()) == ["a'b", "zz"]


def test_the_merge_reads_no_stored_position(spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch) -> None:
    # the MERGE's rows are the stale marking's fresh ones: it neither compares nor decodes the stored positions
    # (an array of decimals per row), so its scan of the table reads the key and the rows' file positions
    from cdclake.decode.columns import LAKE_META_NAMES
    from cdclake.ingest import apply

    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take())
    name = f"lake.{prefix}.inventory.items"
    stored = spark.table(name)
    stored.withColumn(apply.KEEP, stored["_cdc_op"].substr(0, 0)).createOrReplaceTempView("cdc_update_plan")
    columns = stored.columns
    sql = apply.update_sql(name, "cdc_update_plan", ["id"], ["id", "name", "qty"], columns, LAKE_META_NAMES)
    plan = spark.sql(f"EXPLAIN {sql}").collect()[0][0]
    # the target's scan (the source, here the same table, is scanned apart without file positions)
    scans = [line for line in plan.splitlines() if f"BatchScan {name}[" in line and "_file#" in line]
    assert len(scans) == 1, plan
    read = scans[0].split("[", 1)[1].split("]", 1)[0]
    assert "id#" in read and "_pos#" in read and "_cdc_position" not in read, scans[0]


@pytest.mark.parametrize("broadcast", [True, False])
def test_a_small_batchs_marking_broadcasts_the_stored_positions(spark: SparkSession, broadcast: bool) -> None:
    # narrowed to a small batch's keys, the stored sides hold at most a row per key: broadcast, the events are
    # not shuffled (a sort-merge join would shuffle both sides, a job per side before the join)
    from decimal import Decimal

    from cdclake.ingest import apply

    def at(*pairs: tuple[object, ...]) -> list[tuple[object, ...]]:
        return [(*rest, [Decimal(p)]) for *rest, p in pairs]

    position = "array<decimal(38,0)>"
    latest = spark.createDataFrame(
        at((1, "u", 5), (2, "u", 5), (3, "c", 5)), f"id bigint, _cdc_op string, _cdc_position {position}"
    )
    stored = spark.createDataFrame(at((1, 4), (2, 6)), f"id bigint, _cdc_position {position}")
    tombs = spark.createDataFrame(at((3, 7)), f"id bigint, _cdc_position {position}")
    marked = apply.mark_stale(latest, stored, tombs, ["id"], broadcast_stored=broadcast)
    flags = {r["id"]: (r[apply.STALE], r[apply.IN_TARGET], r[apply.TOMBSTONED]) for r in marked.collect()}
    assert flags == {1: (False, True, False), 2: (True, True, False), 3: (True, False, True)}
    plan = marked._jdf.queryExecution().executedPlan().toString()
    assert ("SortMergeJoin" not in plan) == broadcast, plan


def test_a_marking_of_events_newer_than_anything_stored_reads_the_stored_keys_only(spark: SparkSession) -> None:
    # above the tables' position ceiling no event is stale: the stored sides are their keys, present or not
    from decimal import Decimal

    from cdclake.ingest import apply

    latest = spark.createDataFrame(
        [(1, "u", [Decimal(5)]), (2, "d", [Decimal(5)]), (3, "c", [Decimal(5)])],
        "id bigint, _cdc_op string, _cdc_position array<decimal(38,0)>",
    )
    stored = spark.createDataFrame([(1,), (4,)], "id bigint")
    tombs = spark.createDataFrame([(2,)], "id bigint")
    marked = apply.mark_stale(latest, stored, tombs, ["id"], newer=True)
    flags = {r["id"]: (r[apply.STALE], r[apply.IN_TARGET], r[apply.TOMBSTONED]) for r in marked.collect()}
    assert flags == {1: (False, True, False), 2: (False, False, True), 3: (False, False, False)}


def test_a_batch_newer_than_its_tombstones_reads_them_only_when_it_deletes(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # above the position ceiling the tombstones only tell which deletes delete a key again
    from cdclake.ingest import apply

    read: list[bool] = []  # per marking: whether it read the tombstones (a spy: the marking itself runs)
    mark_stale = apply.mark_stale

    def spy(latest, stored, tombstones, key_columns, **kwargs):  # type: ignore[no-untyped-def]
        read.append(tombstones is not None)
        return mark_stale(latest, stored, tombstones, key_columns, **kwargs)

    monkeypatch.setattr(apply, "mark_stale", spy)
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    ingest(table.take())  # the table's first batch: no marking
    table.delete({"id": 2}, lsn=200)
    ingest(table.take())
    assert read == [True] and _tombstones(spark, prefix) == [(2, 200)]
    # the deleted key inserted again and a stored key updated: no delete, so no read of the tombstones
    table.create({"id": 2, "name": "b2", "qty": 2}, lsn=300)
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=301)
    summary = ingest(table.take())
    assert read == [True, False]
    assert rows(spark, prefix) == [(1, "a2", 2), (2, "b2", 2)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["applied_by_op"] == {"c": 1, "u": 1}
    assert _tombstones(spark, prefix) == [(2, 200)]
    # deleted again: the tombstones are read, and the key's one tombstone is advanced, not doubled
    table.delete({"id": 2}, lsn=400)
    ingest(table.take())
    assert read == [True, False, True]
    assert rows(spark, prefix) == [(1, "a2", 2)]
    assert _tombstones(spark, prefix) == [(2, 400)]


def test_a_small_batch_above_the_position_ceiling_is_one_merge_without_reading_the_table(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every event newer than anything stored, every key listed: the MERGE finds which keys the table holds itself
    from cdclake.ingest import apply

    reads: list[bool] = []  # per marking: whether it read the table (a spy: the marking itself runs)
    merges: list[str] = []
    mark_stale, update_sql = apply.mark_stale, apply.update_sql

    def spy(latest, stored, tombstones, key_columns, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(stored is not None)
        return mark_stale(latest, stored, tombstones, key_columns, **kwargs)

    def merge_spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        merges.append(update_sql(*args, **kwargs))
        return merges[-1]

    monkeypatch.setattr(apply, "mark_stale", spy)
    monkeypatch.setattr(apply, "update_sql", merge_spy)
    name = f"lake.{prefix}.inventory.items"
    for i in range(1, 5):
        table.create({"id": i, "name": f"n{i}", "qty": i}, lsn=100 + i)
    ingest(table.take())  # the first batch: appended
    # an update and a delete of stored keys, a new key, a key created and deleted in the batch, a delete of a key
    # the table never held, a stored key updated and then deleted in the batch
    table.update({"id": 1, "name": "n1b", "qty": 10}, lsn=200)
    table.delete({"id": 2}, lsn=201)
    table.create({"id": 5, "name": "n5", "qty": 5}, lsn=202)
    table.create({"id": 6, "name": "n6", "qty": 6}, lsn=203)
    table.delete({"id": 6}, lsn=204)
    table.delete({"id": 7}, lsn=205)
    table.update({"id": 3, "name": "n3b", "qty": 30}, lsn=206)
    table.delete({"id": 3}, lsn=207)
    summary = ingest(table.take())
    assert reads == [False]
    assert len(merges) == 1 and "WHEN NOT MATCHED" in merges[0]
    assert rows(spark, prefix) == [(1, "n1b", 10), (4, "n4", 4), (5, "n5", 5)]
    result = summary.tables[name]
    # one event applied per key (latest per key), none stale; deletes of keys the table did not hold count as applied
    assert result["applied_by_op"] == {"c": 1, "u": 1, "d": 4} and result["skipped"] == 0
    assert _tombstones(spark, prefix) == [(2, 201), (3, 207), (6, 204), (7, 205)]
    # one commit to the table, with the batch's properties and the new ceiling
    batch = summary.batch_id
    commits = [
        s
        for (s,) in spark.sql(f"SELECT summary FROM {name}.snapshots").collect()
        if batch in (s.get("cdc.batch-id"), s.get("cdc.partial-of"))
    ]
    assert len(commits) == 1 and commits[0]["cdc.batch-id"] == batch
    assert tables.position_ceiling(spark, name)[0] == 207
    # late events of the same keys, older than what is stored: below the ceiling, so the batch is marked by the
    # stored positions and tombstones, and every event is stale
    table.update({"id": 1, "name": "late", "qty": 0}, lsn=150)
    table.delete({"id": 2}, lsn=160)
    table.create({"id": 5, "name": "late", "qty": 0}, lsn=170)
    summary = ingest(table.take())
    assert reads == [False, True]
    assert rows(spark, prefix) == [(1, "n1b", 10), (4, "n4", 4), (5, "n5", 5)]
    assert summary.tables[name]["skipped"] == 3 and summary.tables[name]["applied"] == 0
    assert _tombstones(spark, prefix) == [(2, 201), (3, 207), (6, 204), (7, 205)]


def _ceilings(spark: SparkSession, prefix: str) -> tuple[list[int] | None, list[int] | None, list[int]]:
    """The items table's and its tombstones' position ceilings, and the greatest position either stores."""
    name = f"lake.{prefix}.inventory.items"
    top = spark.sql(
        f"SELECT max(p) FROM (SELECT _cdc_position AS p FROM {name} UNION ALL "
        f"SELECT _cdc_position FROM {name}__cdc_deletes)"
    ).collect()[0][0]
    return (
        tables.position_ceiling(spark, name),
        tables.position_ceiling(spark, f"{name}__cdc_deletes"),
        [int(x) for x in top],
    )


def test_a_batch_above_the_position_ceiling_marks_by_keys_and_a_late_event_still_by_positions(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.ingest import apply

    # which way each batch marked its events, and what its stored side read, None for no read (a spy: the marking
    # itself runs)
    calls: list[tuple[bool, list[str] | None]] = []
    mark_stale = apply.mark_stale

    def spy(latest, stored, tombstones, key_columns, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((kwargs.get("newer", False), stored.columns if stored is not None else None))
        return mark_stale(latest, stored, tombstones, key_columns, **kwargs)

    monkeypatch.setattr(apply, "mark_stale", spy)
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    ingest(table.take())
    ceiling, _, top = _ceilings(spark, prefix)
    assert ceiling == top and top[0] == 101
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)
    table.delete({"id": 2}, lsn=201)
    table.create({"id": 3, "name": "c", "qty": 1}, lsn=202)
    ingest(table.take())
    # a small batch whose keys the scans list: one MERGE, so the marking does not read the table at all
    assert calls[-1] == (True, None)
    assert rows(spark, prefix) == [(1, "a2", 2), (3, "c", 1)]
    assert _tombstones(spark, prefix) == [(2, 201)]
    # the tombstones' commit carries the ceiling too, the MERGE's and the append's the same
    ceiling, tomb_ceiling, top = _ceilings(spark, prefix)
    assert ceiling == tomb_ceiling == top and top[0] == 202
    # a late (redelivered) update of a key, a late one of the deleted key, and a new key: below the ceiling, the
    # batch is marked by the stored positions and tombstones, and the late events are stale
    table.update({"id": 1, "name": "old", "qty": 0}, lsn=150)
    table.update({"id": 2, "name": "zombie", "qty": 7}, lsn=160)
    table.create({"id": 4, "name": "d", "qty": 1}, lsn=300)
    summary = ingest(table.take())
    assert calls[-1] == (False, ["id", "_cdc_position"])
    assert rows(spark, prefix) == [(1, "a2", 2), (3, "c", 1), (4, "d", 1)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["skipped"] == 2
    ceiling, _, top = _ceilings(spark, prefix)
    assert ceiling == top and top[0] == 300


def test_the_position_ceiling_survives_a_compaction_and_is_found_again_after_another_writers_commit(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    name = f"lake.{prefix}.inventory.items"
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take())
    table.create({"id": 2, "name": "b", "qty": 1}, lsn=110)
    ingest(table.take())
    ceiling = tables.position_ceiling(spark, name)
    assert ceiling is not None and ceiling[0] == 110
    # a compaction commits a `replace` without the property: the ceiling is read from the snapshot before it
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{prefix}.inventory.items', options => map('min-input-files', '1'))"
    )
    assert (
        spark.sql(f"SELECT operation FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0] == "replace"
    )
    assert tables.position_ceiling(spark, name) == ceiling
    # another writer stores a row at a far greater position, without the property: the ceiling is unknown, so the
    # next batch scans the tables for it, and its update below that position is stale
    spark.sql(f"UPDATE {name} SET _cdc_position = array(CAST(9000000000000 AS DECIMAL(38,0))) WHERE id = 1")
    assert tables.position_ceiling(spark, name) is None
    table.update({"id": 1, "name": "a2", "qty": 2}, lsn=200)
    table.update({"id": 2, "name": "b2", "qty": 2}, lsn=201)
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b2", 2)]
    assert summary.tables[name]["skipped"] == 1
    assert tables.position_ceiling(spark, name) == [9000000000000]


def test_the_tombstones_position_ceiling_is_found_past_their_expiry(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    from cdclake.lake.maintenance import REMOVES_ROWS_ONLY, MaintenancePolicy, run_calls, tombstone_calls

    name = f"lake.{prefix}.inventory.items__cdc_deletes"
    for key in (1, 2, 3):
        table.create({"id": key, "name": "a", "qty": key}, lsn=100 + key)
    ingest(table.take())
    table.delete({"id": 1}, lsn=110)
    table.delete({"id": 2}, lsn=111)
    ingest(table.take())  # both tombstones appended, at one ingest time
    time.sleep(1.1)
    cut = datetime.now(UTC)
    time.sleep(1.1)
    table.create({"id": 1, "name": "b", "qty": 4}, lsn=120)
    ingest(table.take())
    table.delete({"id": 1}, lsn=130)
    ingest(table.take())  # key 1's tombstone advanced by a MERGE
    # compacted (as the maintenance job does): one file holds both tombstones, recorded before and after the cut
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{prefix}.inventory.items__cdc_deletes', "
        "options => map('min-input-files', '1'))"
    )
    ceiling = tables.position_ceiling(spark, name)
    assert ceiling is not None and ceiling[0] == 130
    # the expiry of the tombstones recorded before the cut (key 2's) rewrites that file without it (the side table
    # deletes copy-on-write): an `overwrite`, which another writer's commit could be
    run_calls(
        spark, tombstone_calls(f"lake.{prefix}.inventory.items", MaintenancePolicy(tombstone_retention_days=0), cut)
    )
    last = spark.sql(f"SELECT operation, summary FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    assert last["operation"] == "overwrite" and last["summary"][REMOVES_ROWS_ONLY] == "true"
    stored = spark.sql(f"SELECT id, _cdc_position[0] FROM {name}").collect()
    assert [(r[0], int(r[1])) for r in stored] == [(1, 130)]
    # found past it, without a scan of either table
    assert tables.position_ceiling(spark, name) == ceiling
