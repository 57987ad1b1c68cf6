"""A follower keeps the tables it writes to their newest snapshots (:class:`cdclake.ingest.follow.SnapshotTidier`):
on a real table of the session's embedded lake, written by Spark as a batch writes it, and its tombstones."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.follow import SnapshotTidier
from cdclake.ingest.summary import BatchSummary
from cdclake.lake import rows as lake_rows
from cdclake.lake.names import tombstone_identifier


def test_a_table_is_tidied_after_its_first_batch_then_every_nth() -> None:
    tidier = SnapshotTidier(None, keep=5, every=3)  # type: ignore[arg-type]
    assert [tidier.due("lake.pg.a") for _ in range(7)] == [True, False, False, True, False, False, True]
    assert tidier.due("lake.pg.b")  # each table counts its own batches


def _summary(tables: dict[str, dict[str, int]]) -> BatchSummary:
    return BatchSummary(
        source="pg",
        batch_id="b1",
        status="committed",
        tables={name: {"events": events, "applied": sum(events.values())} for name, events in tables.items()},
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
    tidier = SnapshotTidier(spark, keep=3)

    assert tidier.after(_summary({table: {"c": 1}, untouched: {}})) == 6 + 5
    for name, kept in ((table, 3), (tombstone_identifier(table), 3), (untouched, 8)):
        loaded = lake_rows.load(spark, name)
        assert loaded is not None and len(loaded.metadata.snapshots) == kept, name
    # Spark reads the tidied table as it is, and writes on from it
    assert sorted(r.id for r in spark.table(table).collect()) == [0, 1, 2, 4, 5, 6, 7]
    spark.sql(f"INSERT INTO {table} VALUES (8, 'n8')")
    assert spark.table(table).count() == 8
    # not due again before its 100th batch: nothing more is expired
    assert tidier.after(_summary({table: {"u": 2}})) == 0
