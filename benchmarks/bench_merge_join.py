"""How a MERGE into a large bucketed upsert table joins its batch (prints figures; asserts nothing).

A table of ``--rows`` rows partitioned ``bucket(--buckets, id)`` (merge-on-read, as the ingestion creates its upsert
tables) takes one matched-only MERGE (``WHEN MATCHED THEN UPDATE SET *``, the shape of the upsert's MERGE of fresh
rows whose keys the table holds) of a batch of distinct keys, for each ``--batch`` size (its keys spread over the
whole table), three ways:

* **broadcast**: the batch cached and broadcast to the join, the table streamed past it, for a batch the planner
  estimates at up to ``BROADCAST_SOURCE_MAX_BYTES`` (the ingestion broadcasts up to ``broadcast_max_bytes`` of the
  driver's heap, printed; the driver builds the broadcast in its heap);
* **shuffle**: broadcasting off, both sides shuffled by key into a sort-merge join (the ingestion's plan above
  its limit);
* **storage-partitioned**: the batch first written to an Iceberg table bucketed like the target (its write
  timed in), then joined bucket by bucket without a shuffle (Spark's storage-partitioned join:
  ``spark.sql.sources.v2.bucketing.*`` and Iceberg's ``spark.sql.iceberg.planning.preserve-data-grouping``).

Each way starts from the same snapshot (rolled back between them) in one warm SparkSession on a fresh embedded lake;
prints each MERGE's time, its Spark stages (a shuffle is a stage boundary) and the median of ``--runs``.

Usage: ``.venv/bin/python benchmarks/bench_merge_join.py [--rows 10000000] [--batch 25000,1000000,2500000]
[--buckets 16] [--runs 3] [--ways broadcast,shuffle,storage-partitioned] [--driver-memory 900m]`` (no stack
needed). A MERGE that fails (a broadcast the heap cannot hold) is reported as such and the script goes on.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from cdclake.ingest.tables import BROADCAST_SOURCE_MAX_BYTES, broadcast_max_bytes, planned_bytes
from cdclake.lake.catalog import LakeConfig
from cdclake.spark import build_spark_session, driver_max_heap, out_of_memory, temporary_conf

TABLE_DDL = (
    "CREATE TABLE {name} (id BIGINT, name STRING, qty INT, note STRING, position BIGINT) USING iceberg "
    "PARTITIONED BY (bucket({buckets}, id)) TBLPROPERTIES ('format-version'='2', "
    "'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.delete.mode'='merge-on-read', "
    "'write.merge.distribution-mode'='none')"
)
ROWS = (
    "id",
    "concat('name-', id) AS name",
    "CAST(id % 1000 AS INT) AS qty",
    "repeat('x', 40) AS note",
    "CAST({position} AS BIGINT) AS position",
)
#: Spark's settings for a storage-partitioned join of two Iceberg tables bucketed alike.
SPJ_CONF = {
    "spark.sql.sources.v2.bucketing.enabled": "true",
    "spark.sql.sources.v2.bucketing.pushPartValues.enabled": "true",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.iceberg.planning.preserve-data-grouping": "true",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}
MERGE = "MERGE INTO {target} t USING {source} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"


def _timed(spark: SparkSession, run: Callable[[], object]) -> tuple[float, int]:
    """Seconds ``run`` took and the Spark stages it ran."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, group)
    t0 = time.monotonic()
    run()
    elapsed = time.monotonic() - t0
    tracker = spark.sparkContext.statusTracker()
    stages = sum(len(tracker.getJobInfo(j).stageIds) for j in tracker.getJobIdsForGroup(group))
    spark.sparkContext.setJobGroup("", "")
    return elapsed, stages


def _merge(spark: SparkSession, conf: dict[str, str], statement: str) -> None:
    with temporary_conf(spark, conf):
        spark.sql(statement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument(
        "--batch", default="25000,1000000,2500000", help="the batches' sizes (distinct keys), comma-separated"
    )
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--ways", default="broadcast,shuffle,storage-partitioned", help="which of the three ways, comma-separated"
    )
    parser.add_argument(
        "--driver-memory", help="spark.driver.memory (default: the ingestion's, CDC_SPARK_DRIVER_MEMORY)"
    )
    args = parser.parse_args()
    lake = tempfile.mkdtemp(prefix="bench-merge-join-")
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else None
    spark = build_spark_session("bench-merge-join", lake=LakeConfig.embedded(lake), extra_conf=conf)
    print(f"driver heap: {driver_max_heap(spark) / 2**20:.0f} MiB")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    target = "lake.bench.target"
    t0 = time.monotonic()
    spark.sql(TABLE_DDL.format(name=target, buckets=args.buckets))
    spark.range(args.rows).selectExpr(*(c.format(position="id") for c in ROWS)).writeTo(target).append()
    print(f"table of {args.rows:,} rows in {args.buckets} buckets written in {time.monotonic() - t0:.1f}s")
    base = spark.sql(f"SELECT snapshot_id FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    limit = broadcast_max_bytes(driver_max_heap(spark))
    print(f"the ingestion broadcasts a MERGE source estimated at up to {limit / 2**20:.0f} MiB at this heap")
    for size in (int(s) for s in args.batch.split(",")):
        step = max(1, args.rows // size)  # keys spread over the whole table
        batch = spark.range(0, size * step, step).selectExpr(*(c.format(position=f"id + {args.rows}") for c in ROWS))
        times: dict[str, list[float]] = {way: [] for way in args.ways.split(",")}
        for run in range(args.runs):
            for way in times:
                spark.sql(f"CALL lake.system.rollback_to_snapshot('bench.target', {base})")
                staged = 0.0
                if way == "storage-partitioned":
                    source = "lake.bench.staged"
                    spark.sql(f"DROP TABLE IF EXISTS {source} PURGE")
                    spark.sql(TABLE_DDL.format(name=source, buckets=args.buckets))
                    staged, _ = _timed(spark, batch.writeTo(source).append)
                    conf = SPJ_CONF
                else:
                    source = "bench_batch"
                    cached = batch.cache()
                    cached.count()
                    if run == 0 and way == next(iter(times)):
                        print(f"batch of {size:,} keys cached, estimated at {planned_bytes(cached) / 2**20:.1f} MiB")
                    cached.createOrReplaceTempView(source)
                    threshold = str(BROADCAST_SOURCE_MAX_BYTES) if way == "broadcast" else "-1"
                    conf = {"spark.sql.autoBroadcastJoinThreshold": threshold}
                statement = MERGE.format(target=target, source=source)
                try:
                    seconds, stages = _timed(spark, functools.partial(_merge, spark, conf, statement))
                except (PySparkException, Py4JJavaError) as exc:  # the broadcast of a large batch may not fit
                    reason = out_of_memory(exc) or next(
                        line for line in f"{exc}\n{type(exc).__name__}".splitlines() if line
                    )
                    print(f"batch of {size:,} keys, run {run + 1}, {way}: failed: {reason[:200]}")
                    continue
                finally:
                    if way != "storage-partitioned":
                        cached.unpersist()
                updated = spark.sql(f"SELECT count(*) FROM {target} WHERE position >= {args.rows}").first()[0]
                times[way].append(staged + seconds)
                write = f" (its batch written to a bucketed table first: {staged:.2f}s)" if staged else ""
                print(
                    f"batch of {size:,} keys, run {run + 1}, {way}: {staged + seconds:.2f}s{write}, the MERGE's "
                    f"{stages} Spark stages, {updated:,} rows updated"
                )
        for way, seconds in times.items():
            median = f"median {statistics.median(seconds):.2f}s of {len(seconds)} runs" if seconds else "no run"
            print(f"batch of {size:,} keys, {way}: {median}")
    spark.stop()


if __name__ == "__main__":
    main()
