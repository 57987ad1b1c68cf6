"""The tutorial pipeline: what a data engineer writes from the Iceberg and Spark docs to upsert a Debezium topic
into an Iceberg table (a peer of ``cdclake ingest`` in benchmarks/bench_real_shape.py ``--peers``).

Structured Streaming reads the topic from its start (``trigger(availableNow=True)``: what is there, then stop),
parses each value with ``from_json`` and the payload's schema (inferred from one record, as one would paste it),
drops tombstones, and per micro-batch (``foreachBatch``) keeps each key's last event by source position
(PostgreSQL: ``source.lsn``; MySQL/MariaDB: ``source.file``, ``source.pos``, ``source.row``) and MERGEs it
into the table: delete on ``op = 'd'``, update when matched, insert when not. The table is created from the
row's inferred schema, with Iceberg's default (copy-on-write) properties.

What it does not do, as the tutorials do not: decode Connect's logical types (a decimal stays the base64 of its
unscaled bytes, a timestamp its epoch number), read transaction metadata, or keep an order across topics.

Usage: ``python benchmarks/peer_tutorial.py --bootstrap HOST:PORT --topic T --lake DIR --table NS.NAME
--sample JSON --kind postgres|mariadb [--schemas on|off]``; prints one JSON line ``{"seconds", "batches"}``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--lake", required=True, help="the embedded lake directory to write to")
    parser.add_argument("--table", required=True, help="namespace.name in the lake")
    parser.add_argument("--sample", required=True, help="one change event's value (with an after-image)")
    parser.add_argument("--kind", choices=("postgres", "mariadb"), required=True)
    parser.add_argument("--schemas", choices=("on", "off"), default="on")
    args = parser.parse_args()

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session

    spark = build_spark_session("bench-tutorial", lake=LakeConfig.embedded(Path(args.lake)))
    spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()

    sample = json.loads(args.sample)
    payload = sample["payload"] if args.schemas == "on" else sample

    def ddl(value: object) -> str:
        return spark.range(1).select(F.schema_of_json(F.lit(json.dumps(value)))).first()[0]

    row_ddl = ddl(payload["after"])
    payload_ddl = (
        f"STRUCT<before: {row_ddl}, after: {row_ddl}, op: STRING, ts_ms: BIGINT, source: {ddl(payload['source'])}>"
    )
    value_ddl = f"STRUCT<payload: {payload_ddl}>" if args.schemas == "on" else payload_ddl
    table = f"lake.{args.table}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{args.table.rsplit('.', 1)[0]}")
    row_schema = spark.range(1).select(F.from_json(F.lit("{}"), row_ddl).alias("r")).schema["r"].dataType
    spark.createDataFrame([], row_schema).writeTo(table).using("iceberg").createOrReplace()

    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
        .where(F.col("value").isNotNull())
        .select(F.from_json(F.col("value").cast("string"), value_ddl).alias("v"))
        .select("v.payload.*" if args.schemas == "on" else "v.*")
    )
    position = (
        [F.col("source.lsn")]
        if args.kind == "postgres"
        else [F.col("source.file"), F.col("source.pos"), F.col("source.row")]
    )
    batches = 0

    def upsert(batch, batch_id: int) -> None:
        nonlocal batches
        batches += 1
        keyed = batch.withColumn("_key", F.coalesce(F.col("after.id"), F.col("before.id")))
        last = (
            keyed.withColumn(
                "_n", F.row_number().over(Window.partitionBy("_key").orderBy(*[p.desc() for p in position]))
            )
            .where("_n = 1")
            .select(
                F.col("_key").alias("id"),
                "op",
                *[F.col(f"after.{f.name}") for f in row_schema.fields if f.name != "id"],
            )
        )
        last.createOrReplaceGlobalTempView("tutorial_changes")
        batch.sparkSession.sql(
            f"""MERGE INTO {table} t USING global_temp.tutorial_changes s ON t.id = s.id
                WHEN MATCHED AND s.op = 'd' THEN DELETE
                WHEN MATCHED THEN UPDATE SET *
                WHEN NOT MATCHED AND s.op != 'd' THEN INSERT *"""
        )

    checkpoint = tempfile.mkdtemp(prefix="tutorial-checkpoint-")
    query = events.writeStream.foreachBatch(upsert).option("checkpointLocation", checkpoint).trigger(availableNow=True)
    query.start().awaitTermination()
    seconds = time.monotonic() - started
    spark.stop()
    print(json.dumps({"seconds": seconds, "batches": batches}))


if __name__ == "__main__":
    main()
