"""The cost of recording delete tombstones in an upsert table's side table (prints figures; asserts nothing).

An upsert batch records a tombstone ``(key, position)`` for each fresh delete in ``<table>__cdc_deletes``
(docs/ingestion.md, Modes). A key's first tombstone is appended (:func:`cdclake.ingest.apply.tombstone_rows`); a
key that already has one (deleted, re-inserted, deleted again) has it advanced by a matched-only MERGE, the
deletes broadcast (:func:`cdclake.ingest.apply.tombstone_merge_sql` run by
:func:`cdclake.ingest.tables.merge_broadcast`). This script times both, per run ``--deletes`` first-time
tombstones appended and as many keys deleted again, in a side table that already holds ``--tombstones`` of them
(merge-on-read, as the ingestion creates it), in one warm SparkSession on a fresh embedded lake.

Usage: ``.venv/bin/python benchmarks/bench_tombstones.py [--tombstones 1000000] [--deletes 500] [--runs 4]``
(no stack needed). Prints, per way, each run's time and the median of the runs after the first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdclake.ingest import apply
from cdclake.ingest.tables import merge_broadcast
from cdclake.lake.catalog import LakeConfig
from cdclake.spark import build_spark_session

SIDE_TABLE_DDL = (
    "CREATE TABLE {name} (id BIGINT, _cdc_position ARRAY<DECIMAL(38,0)>, _cdc_deleted_at TIMESTAMP) USING iceberg "
    "TBLPROPERTIES ('write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.delete.mode'='merge-on-read')"
)


def _deletes(spark: SparkSession, first: int, count: int, newer: int = 0) -> DataFrame:
    """``count`` delete events of keys from ``first`` on, each at the position ``[key + newer]`` (cached)."""
    return (
        spark.range(first, first + count)
        .select(
            F.col("id"),
            F.array((F.col("id") + newer).cast("decimal(38,0)")).alias("_cdc_position"),
            F.lit("d").alias("_cdc_op"),
        )
        .localCheckpoint(eager=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tombstones", type=int, default=1_000_000, help="tombstones already in the side table")
    parser.add_argument("--deletes", type=int, default=500, help="deletes per run, for each of the two ways")
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    spark = build_spark_session("bench-tombstones", lake=LakeConfig.embedded(tempfile.mkdtemp(prefix="bench-tomb-")))
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    tables = {"append": "lake.bench.appended", "merge": "lake.bench.merged"}
    for name in tables.values():
        spark.sql(SIDE_TABLE_DDL.format(name=name))
        _deletes(spark, 0, args.tombstones).select(
            "id", "_cdc_position", F.current_timestamp().alias("_cdc_deleted_at")
        ).writeTo(name).append()
    times: dict[str, list[float]] = {way: [] for way in tables}
    first, again = args.tombstones, 0
    for run in range(args.runs):
        for way, name in tables.items():
            if way == "append":  # keys without a tombstone
                batch = _deletes(spark, first, args.deletes)
                first += args.deletes
            else:  # keys that have one, deleted again at a newer position
                batch = _deletes(spark, again, args.deletes, newer=run + 1)
                again += args.deletes
            start = time.monotonic()
            if way == "merge":
                merge_broadcast(spark, batch, "bench_deletes", apply.tombstone_merge_sql(name, "bench_deletes", ["id"]))
            else:
                apply.tombstone_rows(batch, ["id"]).writeTo(name).append()
            times[way].append(time.monotonic() - start)
    label = {"append": "first-time tombstones appended", "merge": "tombstones of keys deleted again MERGEd"}
    for way, runs in times.items():
        warm = statistics.median(runs[1:]) if len(runs) > 1 else runs[0]
        print(
            f"{args.deletes:,} {label[way]} in a side table of {args.tombstones:,}: "
            f"{warm:.2f} s warm median (runs: {', '.join(f'{t:.2f}' for t in runs)})"
        )
    spark.stop()


if __name__ == "__main__":
    main()
