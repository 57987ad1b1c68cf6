"""A local SparkSession with the project's jars: Iceberg in the embedded catalog, and the Spark Kafka source."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog import load_catalog
from pyspark.sql import SparkSession

from cdclake.lake import LakeConfig

pytestmark = [pytest.mark.integration("spark"), pytest.mark.spark]


def test_iceberg_create_merge_read_in_embedded_catalog(spark: SparkSession, spark_lake_dir: Path) -> None:
    table = f"lake.it.t_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.it")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING, amount DECIMAL(12,2)) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 1.10), (2, 'b', 2.20), (3, 'c', 3.30)")
    spark.createDataFrame(
        [(2, "bb", "20.00", "u"), (3, None, None, "d"), (4, "d", "4.40", "c")],
        "id bigint, v string, amount string, op string",
    ).selectExpr("id", "v", "CAST(amount AS DECIMAL(12,2)) AS amount", "op").createOrReplaceTempView("changes")
    spark.conf.set("spark.sql.iceberg.snapshot-property.cdc.batch-id", "it-1")
    try:
        spark.sql(
            f"""MERGE INTO {table} t USING changes s ON t.id = s.id
                WHEN MATCHED AND s.op = 'd' THEN DELETE
                WHEN MATCHED THEN UPDATE SET t.v = s.v, t.amount = s.amount
                WHEN NOT MATCHED AND s.op <> 'd' THEN INSERT (id, v, amount) VALUES (s.id, s.v, s.amount)"""
        )
    finally:
        spark.conf.unset("spark.sql.iceberg.snapshot-property.cdc.batch-id")
    rows = [tuple(r) for r in spark.sql(f"SELECT id, v, CAST(amount AS STRING) FROM {table} ORDER BY id").collect()]
    assert rows == [(1, "a", "1.10"), (2, "bb", "20.00"), (4, "d", "4.40")]
    summaries = [r[0] for r in spark.sql(f"SELECT summary FROM {table}.snapshots ORDER BY committed_at").collect()]
    assert len(summaries) == 2
    assert summaries[-1]["cdc.batch-id"] == "it-1"
    # the same lake opens from pyiceberg with the properties `cdclake lake info` prints
    catalog = load_catalog(**LakeConfig.embedded(spark_lake_dir).pyiceberg_properties())
    loaded = catalog.load_table(table.removeprefix("lake."))
    assert sorted((r["id"], r["v"]) for r in loaded.scan().to_arrow().to_pylist()) == [(1, "a"), (2, "bb"), (4, "d")]
    assert loaded.metadata.format_version == 2
    assert loaded.current_snapshot().summary["cdc.batch-id"] == "it-1"


@pytest.mark.integration("stack")
def test_spark_kafka_source_reads_a_bounded_offset_range(spark: SparkSession, kafka_bootstrap: str) -> None:
    topic = f"it-spark-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(20):
        producer.produce(
            topic, key=str(i).encode(), value=json.dumps({"n": i}).encode(), partition=i % 2, headers=[("h", b"x")]
        )
    assert producer.flush(30) == 0
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("assign", json.dumps({topic: [0, 1]}))
        .option("startingOffsets", json.dumps({topic: {"0": 2, "1": 0}}))
        .option("endingOffsets", json.dumps({topic: {"0": 7, "1": 4}}))
        .option("includeHeaders", "true")
        .load()
    )
    rows = sorted(
        (r.partition, r.offset, r.key.decode(), json.loads(r.value)["n"], r.headers[0].key, bytes(r.headers[0].value))
        for r in df.collect()
    )
    expected = [(0, o, str(2 * o), 2 * o, "h", b"x") for o in range(2, 7)] + [
        (1, o, str(2 * o + 1), 2 * o + 1, "h", b"x") for o in range(4)
    ]
    assert rows == expected
