"""TOAST placeholders, partition moves, append mode, schema evolution policies, and the batch cap."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from cdclake.connectors.spec import LakeMode, LakeOptions, SchemaPolicy
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.tables import UPSERT_ROW_GROUP_BYTES, table_properties

from .conftest import RunBatch, rows
from .events import UNAVAILABLE, PgTable

pytestmark = pytest.mark.spark


def _versions(spark: SparkSession, table: str, columns: str) -> list[tuple[object, ...]]:
    """History-mode rows of ``table``: ``columns`` (SQL, the first one the key), then the first element of
    ``_cdc_valid_from`` and ``_cdc_valid_to`` and ``_cdc_is_current``, ordered by key and start."""
    got = spark.sql(
        f"SELECT {columns}, _cdc_valid_from[0], _cdc_valid_to[0], _cdc_is_current FROM {table} "
        "ORDER BY 1, _cdc_valid_from"
    ).collect()
    n = len(got[0]) - 3 if got else 0
    return [(*r[:n], int(r[n]), None if r[n + 1] is None else int(r[n + 1]), r[n + 2]) for r in got]


def test_unchanged_toast_value_keeps_the_stored_value(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    big = "B" * 50
    table.create({"id": 1, "name": big, "qty": 1}, lsn=100)
    ingest(table.take())
    table.update({"id": 1, "name": UNAVAILABLE, "qty": 2}, lsn=200)  # name unchanged, TOASTed
    summary = ingest(table.take())
    assert rows(spark, prefix) == [(1, big, 2)]
    # inside one batch: the placeholder takes the value of the key's earlier event
    table.create({"id": 2, "name": "first", "qty": 1}, lsn=300)
    table.update({"id": 2, "name": UNAVAILABLE, "qty": 5}, lsn=310)
    # a placeholder with no value anywhere (row never seen): stored as null, never as the placeholder
    table.update({"id": 3, "name": UNAVAILABLE, "qty": 7}, lsn=320)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, big, 2), (2, "first", 5), (3, None, 7)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["applied"] == 1
    assert (
        spark.sql(f"SELECT count(*) FROM lake.{prefix}.inventory.items WHERE name = '{UNAVAILABLE}'").collect()[0][0]
        == 0
    )


def test_update_of_the_partition_column_does_not_duplicate(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    source = SourceConfig(
        name=prefix,
        topic_prefix=prefix,
        tables={"inventory.items": LakeOptions(partitioning=("identity(name)", "bucket(4, id)"))},
    )
    table.create({"id": 1, "name": "eu", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "us", "qty": 1}, lsn=101)
    ingest(table.take(), source=source)
    # one MERGE moves rows both ways between partitions and inserts a new key: its rows reach the writer in the
    # join's order, not clustered by partition (the table's MERGE distribution mode is none)
    table.update({"id": 1, "name": "us", "qty": 2}, lsn=200)
    table.update({"id": 2, "name": "eu", "qty": 2}, lsn=201)
    table.create({"id": 3, "name": "eu", "qty": 3}, lsn=202)
    ingest(table.take(), source=source)
    assert rows(spark, prefix) == [(1, "us", 2), (2, "eu", 2), (3, "eu", 3)]
    counts = spark.sql(f"SELECT count(*), count(DISTINCT id) FROM lake.{prefix}.inventory.items").collect()[0]
    assert tuple(counts) == (3, 3)
    fields = spark.sql(f"SELECT * FROM lake.{prefix}.inventory.items.partitions").schema["partition"].dataType.names
    assert fields == ["name", "id_bucket"]
    props = table_properties(spark, f"lake.{prefix}.inventory.items")
    # small row groups, so that a scan narrowed to a batch's keys skips most of a key-ordered file's
    assert props["write.parquet.row-group-size-bytes"] == str(UPSERT_ROW_GROUP_BYTES)
    assert props["write.merge.distribution-mode"] == "none"


def test_append_mode_keeps_every_event_once(spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch) -> None:
    source = SourceConfig(
        name=prefix, topic_prefix=prefix, tables={"inventory.items": LakeOptions(mode=LakeMode.APPEND)}
    )
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.update({"id": 1, "name": "b", "qty": 2}, lsn=110)
    table.delete({"id": 1, "name": "b", "qty": 2}, lsn=120)
    ingest(table.take(), source=source)
    table.truncate(lsn=130)
    ingest(table.take(), source=source)
    again = ingest([], source=source)
    assert again.batch_id is None
    got = spark.sql(
        f"SELECT _cdc_op, id, name, _cdc_offset FROM lake.{prefix}.inventory.items ORDER BY _cdc_offset"
    ).collect()
    assert [tuple(r) for r in got] == [("c", 1, "a", 0), ("u", 1, "b", 1), ("d", 1, None, 2), ("t", None, None, 4)]
    # no key-bounded scans: Iceberg's row-group size
    assert "write.parquet.row-group-size-bytes" not in table_properties(spark, f"lake.{prefix}.inventory.items")


def test_new_column_is_added_and_old_rows_read_null(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take())
    table.columns = {**table.columns, "note": "string"}
    table.create({"id": 2, "name": "b", "qty": 2, "note": "new"}, lsn=200)
    summary = ingest(table.take())
    assert rows(spark, prefix, cols="id, name, qty, note") == [(1, "a", 1, None), (2, "b", 2, "new")]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["schema_changes"] == ["add_column note: - -> STRING"]
    # the column disappears at the source: kept in the lake, filled with nulls from then on
    table.columns = {"id": "int64", "name": "string", "qty": "int32"}
    table.update({"id": 2, "name": "b2", "qty": 3}, lsn=300)
    summary = ingest(table.take())
    assert rows(spark, prefix, cols="id, name, qty, note") == [(1, "a", 1, None), (2, "b2", 3, None)]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["schema_changes"] == [
        "column_missing_in_source note: STRING -> -"
    ]


def test_widening_int_to_long_evolves(spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch) -> None:
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take())
    table.columns = {"id": "int64", "name": "string", "qty": "int64"}
    table.create({"id": 2, "name": "b", "qty": 2**40}, lsn=200)
    ingest(table.take())
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b", 2**40)]
    assert dict(spark.table(f"lake.{prefix}.inventory.items").dtypes)["qty"] == "bigint"


def test_incompatible_change_quarantines_only_that_table(spark: SparkSession, prefix: str, ingest: RunBatch) -> None:
    items = PgTable(prefix=prefix, table="items")
    other = PgTable(prefix=prefix, table="other", partition=0)
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    other.create({"id": 1, "name": "x", "qty": 1}, lsn=101)
    ingest(items.take(), other.take())
    items.columns = {"id": "int64", "name": "int64", "qty": "int32"}  # string -> int: incompatible
    items.create({"id": 2, "name": 5, "qty": 2}, lsn=200)
    other.create({"id": 2, "name": "y", "qty": 2}, lsn=201)
    summary = ingest(items.take(), other.take())
    problem = summary.tables[f"lake.{prefix}.inventory.items"]["quarantined"]
    assert "incompatible_type_change name: STRING -> BIGINT" in problem
    assert rows(spark, prefix) == [(1, "a", 1)]
    assert rows(spark, prefix, table="other") == [(1, "x", 1), (2, "y", 2)]
    held = spark.sql(
        f"SELECT `table`, topic, `offset` FROM lake.cdc_audit.quarantine WHERE source = '{prefix}'"
    ).collect()
    assert [tuple(r) for r in held] == [(f"lake.{prefix}.inventory.items", f"{prefix}.inventory.items", 1)]
    assert summary.as_dict()["checks"]["ok"] is False


def test_fail_policy_raises_naming_the_column(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    from cdclake.exceptions import SchemaEvolutionError

    source = SourceConfig(
        name=prefix, topic_prefix=prefix, tables={"inventory.items": LakeOptions(schema_policy=SchemaPolicy.FAIL)}
    )
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(table.take(), source=source)
    table.columns = {**table.columns, "extra": "string"}
    table.create({"id": 2, "name": "b", "qty": 2, "extra": "x"}, lsn=200)
    with pytest.raises(SchemaEvolutionError, match=r"items: schema changed and its policy is 'fail': add_column extra"):
        ingest(table.take(), source=source)


def test_max_records_splits_a_backlog_into_batches(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    for i in range(10):
        table.create({"id": i, "name": f"n{i}", "qty": i}, lsn=100 + i)
    first = ingest(table.take(), max_records=4)
    assert first.records == 4
    second = ingest([], max_records=4)
    third = ingest([], max_records=4)
    assert (second.records, third.records) == (4, 2)
    assert ingest([], max_records=4).batch_id is None
    assert rows(spark, prefix) == [(i, f"n{i}", i) for i in range(10)]


def test_scd2_mode_keeps_history_with_valid_from_and_to(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch
) -> None:
    source = SourceConfig(name=prefix, topic_prefix=prefix, tables={"inventory.items": LakeOptions(mode=LakeMode.SCD2)})
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.update({"id": 1, "name": "b", "qty": 2}, lsn=110)
    table.create({"id": 2, "name": "x", "qty": 1}, lsn=120)
    ingest(table.take(), source=source)
    table.update({"id": 1, "name": UNAVAILABLE, "qty": 3}, lsn=200)  # unchanged TOAST -> previous version's value
    table.delete({"id": 2}, lsn=210)
    table.update({"id": 1, "name": "old", "qty": 0}, lsn=105)  # stale: older than what is stored
    summary = ingest(table.take(), source=source)
    assert _versions(spark, f"lake.{prefix}.inventory.items", "id, name, qty") == [
        (1, "a", 1, 100, 110, False),
        (1, "b", 2, 110, 200, False),
        (1, "b", 3, 200, None, True),
        (2, "x", 1, 120, 210, False),
    ]
    assert summary.tables[f"lake.{prefix}.inventory.items"]["skipped"] == 1
    assert ingest([], source=source).batch_id is None


def test_scd2_mode_quotes_hostile_key_and_placeholder_column_names(
    spark: SparkSession, prefix: str, ingest: RunBatch
) -> None:
    """History mode with a key column named ``co`d.e`` and a TOAST-placeholder column named ``n.o`te``: every
    step that names them (the staleness join, the versions, the closing MERGE) quotes them."""
    key, note = "co`d.e", "n.o`te"
    codes = PgTable(prefix=prefix, table="codes", columns={key: "string", note: "string", "qty": "int32"}, key=(key,))
    source = SourceConfig(name=prefix, topic_prefix=prefix, tables={"inventory.codes": LakeOptions(mode=LakeMode.SCD2)})
    codes.create({key: "a'b", note: "long text", "qty": 1}, lsn=100)
    codes.create({key: "c\\d", note: "other", "qty": 1}, lsn=101)
    ingest(codes.take(), source=source)
    codes.update({key: "a'b", note: UNAVAILABLE, "qty": 2}, lsn=200)  # unchanged TOAST: the version before's value
    codes.delete({key: "c\\d"}, lsn=201)
    codes.update({key: "a'b", note: "stale", "qty": 0}, lsn=90)  # older than what is stored
    summary = ingest(codes.take(), source=source)
    assert _versions(spark, f"lake.{prefix}.inventory.codes", "`co``d.e`, `n.o``te`, qty") == [
        ("a'b", "long text", 1, 100, 200, False),
        ("a'b", "long text", 2, 200, None, True),
        ("c\\d", "other", 1, 101, 201, False),
    ]
    assert summary.tables[f"lake.{prefix}.inventory.codes"]["skipped"] == 1
