"""The transactions phase's gathering on a large batch, alone and warm (prints figures; asserts nothing).

:func:`cdclake.ingest.transactions.facts` gathers one row per transaction from the batch's cached decoded change
rows and its BEGIN/END events: two Spark jobs read their narrow projections through Arrow, and the driver groups
them with numpy and Arrow (:func:`~cdclake.ingest.transactions.facts_of`). Here the cached rows are
built in Spark in the shape of the real-shape PostgreSQL backlog's batch (``bench_real_shape.py``):
``--transactions`` transactions (333,333 by default: 1M change events) of 3 updates of one table each, spread over
4 partitions, PostgreSQL ids (``<txId>:<LSN>``) and positions (``[lsn, 0]``), a BEGIN and an END per transaction
in the transaction topic with its per-table count. No Kafka and no decoding: the gathering alone, repeated
``--repeat`` times in one session (the first pays for the JIT and code generation).

Prints each run's seconds of: the two Spark jobs read through Arrow; the driver's grouping of what they read; the two
together (what the phase runs), and the peak of the Python process's resident memory.

Usage: ``.venv/bin/python benchmarks/bench_transactions.py [--transactions 333333] [--repeat 4]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def cached_batch(spark: Any, transactions: int) -> tuple[Any, Any]:
    """(decoded change rows, BEGIN/END events), cached and counted."""
    from pyspark.sql import functions as F

    tx = F.col("t")
    lsn = (F.col("id") * 8 + 1_000_000).cast("string")
    data = (
        spark.range(transactions * 3)
        .withColumn("t", (F.col("id") / 3).cast("long"))
        .select(
            F.concat(tx.cast("string"), F.lit(":"), lsn).alias("_cdc_tx_id"),
            (F.col("id") % 3 + 1).alias("_cdc_tx_total_order"),
            F.lit("inventory").alias("_cdc_schema"),
            F.lit(None).cast("string").alias("_cdc_db"),
            F.lit("customers").alias("_cdc_table"),
            F.lit("bench.inventory.customers").alias("_cdc_topic"),
            (F.col("id") % 4).cast("int").alias("_cdc_partition"),
            (F.col("id") / 4).cast("long").alias("_cdc_offset"),
            F.timestamp_seconds(F.lit(1_795_900_000) + tx / 1000).alias("_cdc_kafka_ts"),
            F.array(lsn.cast("decimal(38,0)"), F.lit(0).cast("decimal(38,0)")).alias("_cdc_position"),
            F.lit("u").alias("_cdc_op"),
            F.lit("postgresql").alias("_cdc_connector"),
            F.repeat(F.lit("x"), 200).alias("payload"),  # a row's columns, which the job does not read
        )
        .persist()
    )
    end = F.col("id") % 2 == 1
    counts = F.array(
        F.struct(F.lit("inventory.customers").alias("data_collection"), F.lit(3).cast("long").alias("event_count"))
    )
    markers = (
        spark.range(transactions * 2)
        .withColumn("t", (F.col("id") / 2).cast("long"))
        .select(
            F.concat(tx.cast("string"), F.lit(":"), (F.col("id") * 8).cast("string")).alias("id"),
            F.lit("bench.transaction").alias("topic"),
            F.lit(0).alias("partition"),
            F.col("id").alias("offset"),
            F.timestamp_seconds(F.lit(1_795_900_000) + tx / 1000).alias("kafka_ts"),
            F.when(end, "END").otherwise("BEGIN").alias("status"),
            F.when(end, F.lit(3)).cast("long").alias("event_count"),
            F.when(end, counts).alias("data_collections"),
        )
        .persist()
    )
    data.count()
    markers.count()
    return data, markers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=333_333, help="Transactions of 3 events each.")
    parser.add_argument("--repeat", type=int, default=4, help="Runs of each job in the session.")
    args = parser.parse_args()

    from cdclake.ingest import transactions as T
    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session

    spark = build_spark_session("cdclake-bench-transactions", lake=LakeConfig.embedded(tempfile.mkdtemp()))
    data, markers = cached_batch(spark, args.transactions)

    def read() -> tuple[Any, Any]:
        return T._events([data]).toArrow(), T._markers(markers).toArrow()

    read()  # the session's first Arrow collection, outside the figures
    events, marks = read()
    jobs: dict[str, Callable[[], object]] = {
        "the two Spark jobs, read through Arrow": read,
        "the driver's grouping of their rows": lambda: T.facts_of(events, marks),
        "both (the phase's gathering)": lambda: T.facts([data], markers),
    }
    print(
        f"{args.transactions:,} transactions, {args.transactions * 3:,} change rows, {args.transactions * 2:,} BEGIN/END"
    )
    for name, job in jobs.items():
        seconds = []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            job()
            seconds.append(time.monotonic() - t0)
        warm = seconds[1:] or seconds
        print(
            f"{name}: first {seconds[0]:.2f} s, then median {statistics.median(warm):.2f} s "
            f"({', '.join(f'{s:.2f}' for s in warm)})",
            flush=True,
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak RSS of the Python process: {rss:.2f} GiB")


if __name__ == "__main__":
    main()
