"""Benchmark: ``decode_records`` vs plain ``from_json`` over the same synthetic Debezium records.

Usage: ``.venv/bin/python benchmarks/bench_decode.py --records 1000000`` (writes a temp parquet, times both,
prints records/s and the ratio; schemas on and off). Each figure is the best of ``--repeat`` runs (default 2):
single runs on a shared 2-core VM vary by about 15%.

Two inputs, both sides always over the same one:

* ``parquet``: the records read from parquet by each side (decode_records reads them more than once: by sample,
  the sample's filter and the decoding pass; by pass, its discovery passes and the decoding pass);
* ``cached``: the records cached in memory first, as the ingestion job does with replayed batches (Kafka
  batches are not cached: the job reads them from the broker).

Two decoder settings: ``before+after`` (the library's default, ``_cdc_before`` decoded too) and ``after`` (the
ingestion job's setting, ``include_before=False``).

Discovery (``--discovery``): ``sample`` (default, the ingestion job's: the records sampled at the job's points by
a filter, ``FrameSampler``, and trusted since they show one schema version; the decoding pass checks every
record against it) or ``pass`` (the library's default without a sampler: three passes over the records).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.decode import ConnectSchemaSource, DecodeOptions, decode_records
from cdclake.decode.connect import plan_row
from cdclake.decode.reference import encode_unscaled
from cdclake.ingest.offsets import OffsetRange
from cdclake.ingest.sources import FrameSampler
from cdclake.lake import LakeConfig
from cdclake.spark import build_spark_session

TOPIC = "bench.public.orders"

#: The plain ``from_json`` side's type of ``source``: its fields as text (what the decoder reads them as).
SOURCE_WIRE = T.StructType(
    [T.StructField(n, T.StringType()) for n in ("version", "connector", "name", "ts_ms", "snapshot", "db", "schema",
                                               "table", "sequence", "lsn", "txId")]
)  # fmt: skip
FIELDS = [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "customer", "type": "string"},
    {"field": "amount", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2", "connect.decimal.precision": "12"}},
    {"field": "created", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "day", "type": "int32", "name": "io.debezium.time.Date"},
    {"field": "updated", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "qty", "type": "int32"},
]  # fmt: skip


def _envelope(i: int, schemas: bool) -> str:
    row = {"id": i, "customer": f"c{i % 1000}", "amount": encode_unscaled(i * 7 % 100000), "created": 1_700_000_000_000_000 + i,  # noqa: E501
           "day": 19000 + i % 365, "updated": "2024-01-01T00:00:00.123456Z", "qty": i % 50}  # fmt: skip
    payload = {
        "before": None, "after": row, "op": "c", "ts_ms": 1700000000000,
        "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "bench", "ts_ms": 1700000000000,
                   "snapshot": "false", "db": "app", "schema": "public", "table": "orders",
                   "sequence": f'["{i}","{i}"]', "lsn": i, "txId": i},
    }  # fmt: skip
    if not schemas:
        return json.dumps(payload, separators=(",", ":"))
    row_schema = {"type": "struct", "optional": True, "name": "bench.public.orders.Value", "fields": FIELDS}
    schema = {"type": "struct", "name": "bench.public.orders.Envelope", "fields": [
        {**row_schema, "field": "before"}, {**row_schema, "field": "after"},
        {"type": "struct", "field": "source", "fields": []}, {"type": "string", "field": "op"},
        {"type": "int64", "field": "ts_ms"}]}  # fmt: skip
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"))


def generate(spark: SparkSession, n: int, schemas: bool, path: Path) -> None:
    """Write ``n`` records to parquet (generated in Spark partitions from a few templates; values vary by id)."""
    templates = [_envelope(i, schemas) for i in range(1000)]
    base = spark.range(n).select(
        F.lit(TOPIC).alias("topic"),
        F.lit(0).alias("partition"),
        F.col("id").alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit('{"id":1}').cast("binary").alias("key"),
        F.element_at(F.array(*[F.lit(t) for t in templates]), (F.col("id") % 1000 + 1).cast("int"))
        .cast("binary")
        .alias("value"),
    )
    base.write.mode("overwrite").parquet(str(path))


def _time(label: str, n: int, frame_fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    """Best of ``repeat`` runs (each builds its frame anew: the decoder's discovery is timed every time)."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        frame_fn().write.format("noop").mode("overwrite").save()
        runs.append(time.perf_counter() - start)
    elapsed = min(runs)
    print(f"  {label:<30} {elapsed:8.2f} s  {n / elapsed:12,.0f} records/s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is reported (default 2)")
    parser.add_argument(
        "--discovery", choices=("sample", "pass"), default="sample", help="how the decoder finds the schema versions"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spark = build_spark_session("bench-decode", lake=LakeConfig.embedded(Path(tmp) / "lake"))
        spark.sparkContext.setLogLevel("ERROR")
        plan = plan_row(FIELDS)
        for schemas in (True, False):
            path = Path(tmp) / f"records-{schemas}"
            generate(spark, args.records, schemas, path)
            records = spark.read.parquet(str(path))
            env = T.StructType(
                [T.StructField("before", plan.wire), T.StructField("after", plan.wire),
                 T.StructField("source", SOURCE_WIRE), T.StructField("op", T.StringType()),
                 T.StructField("ts_ms", T.StringType())]
            )  # fmt: skip
            wire = T.StructType([T.StructField("payload", env)]) if schemas else env
            print(f"schemas.enable={str(schemas).lower()}  records={args.records:,}  discovery={args.discovery}")
            cached = records.persist()
            cached.count()
            for label, frame in (("parquet", records), ("cached", cached)):
                plain = _time(
                    f"{label} from_json",
                    args.records,
                    lambda frame=frame, wire=wire: frame.select(
                        F.from_json(F.col("value").cast("string"), wire).alias("j")
                    ).select("j.*"),  # noqa: E501
                    args.repeat,
                )
                for before in (True, False):
                    options = DecodeOptions(
                        value_schemas_enabled=schemas,
                        key_schemas_enabled=False,
                        schema_source=ConnectSchemaSource({TOPIC: {"type": "struct", "fields": FIELDS}}),
                        include_before=before,
                    )

                    def decode(frame=frame, options=options):  # type: ignore[no-untyped-def]
                        if args.discovery == "pass":
                            batch = decode_records(frame, options=options)
                        else:
                            sampler = FrameSampler(frame, [OffsetRange(TOPIC, 0, 0, args.records)])
                            batch = decode_records(frame, options=options, sampler=sampler, sample_only=True)
                            assert batch.discovery == "sample"
                        (table,) = batch.tables.values()
                        return table

                    setting = "before+after" if before else "after"
                    decoded = _time(f"{label} decode {setting}", args.records, decode, args.repeat)
                    print(f"    ratio decode/from_json throughput ({label}, {setting}): {plain / decoded:.2f}")
            cached.unpersist()
        spark.stop()


if __name__ == "__main__":
    main()
