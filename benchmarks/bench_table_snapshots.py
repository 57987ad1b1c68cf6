"""What a data table's snapshot count costs its next commits (prints figures; asserts nothing).

Every Iceberg commit writes a new metadata file holding the table's whole snapshot list, and a follower
(``cdclake ingest --follow``) commits to its tables every few seconds: one to three commits per table and batch.
This script measures the commits a batch makes (a one-row append and a one-key matched-only MERGE, each carrying
a batch's ``cdc.*`` snapshot properties) on one table at several snapshot counts.

The table is an upsert table as the ingestion creates it (merge-on-read, ``bucket(16, id)``, 20,000 rows). Its
snapshot history is made by copying its metadata file with ``N`` extra snapshots, each a copy of a real one
(the same summary and manifest list, its own id and time), registered as a table of its own
(``register_table``): what matters to a commit is the size of the list it reads and rewrites, and writing
``N`` real commits would take hours. Each count then gets ``--commits`` appends and as many MERGEs, timed one
by one in a warm session (median, min-max), after a few commits to warm it up.

Usage: ``.venv/bin/python benchmarks/bench_table_snapshots.py [--counts 10,1000,10000,30000,60000] [--commits 5]``
(no stack needed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from cdclake.ingest.tables import snapshot_properties
from cdclake.lake.catalog import LakeConfig
from cdclake.spark import build_spark_session

DDL = (
    "CREATE TABLE {name} (id BIGINT, name STRING, email STRING, balance DECIMAL(12,2), updated_at TIMESTAMP, "
    "_cdc_op STRING, _cdc_position ARRAY<DECIMAL(38,0)>) USING iceberg PARTITIONED BY (bucket(16, id)) "
    "TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.delete.mode'='merge-on-read')"
)
ROWS = 20_000
#: The snapshot properties of a batch's commit, as the ingestion sets them.
BATCH_PROPERTIES = {
    "cdc.batch-id": "pg-20261128T120000-0a1b2c3d",
    "cdc.source": "pg",
    "cdc.offsets": json.dumps({"pg.inventory.customers": {"0": [1_200_000, 1_205_400]}, "pg.transaction": {"0": 9}}),
    "cdc.watermark": json.dumps([1_764_330_000_000, 912_345_678, 2]),
}


def _write(spark: SparkSession, sql: str) -> float:
    with snapshot_properties(spark, BATCH_PROPERTIES):
        t0 = time.perf_counter()
        spark.sql(sql)
        return time.perf_counter() - t0


def _with_snapshots(metadata: dict[str, Any], extra: int) -> dict[str, Any]:
    """``metadata`` with ``extra`` more snapshots, older than its own: copies of its first one."""
    out = json.loads(json.dumps(metadata))
    first = min(out["snapshots"], key=lambda s: s["timestamp-ms"])
    copies = []
    for i in range(extra):
        copy = dict(first, **{"snapshot-id": 10**12 + i, "timestamp-ms": first["timestamp-ms"] - (extra - i) * 4000})
        copy.pop("parent-snapshot-id", None)
        copies.append(copy)
    out["snapshots"] = copies + out["snapshots"]
    out["snapshot-log"] = [{"timestamp-ms": c["timestamp-ms"], "snapshot-id": c["snapshot-id"]} for c in copies] + out[
        "snapshot-log"
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", default="10,1000,10000,30000,60000", help="snapshot counts, comma-separated")
    parser.add_argument("--commits", type=int, default=5, help="appends and MERGEs timed per count")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]

    lake = LakeConfig.embedded(Path(tempfile.mkdtemp(prefix="cdclake-bench-snapshots-")))
    spark = build_spark_session("bench-table-snapshots", lake=lake)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench")
    spark.sql(DDL.format(name="lake.bench.base"))
    spark.sql(
        f"INSERT INTO lake.bench.base SELECT id, concat('name ', id), concat(id, '@example.com'), "
        f"CAST(id % 10000 AS DECIMAL(12,2)), current_timestamp(), 'c', array(CAST(id AS DECIMAL(38,0))) "
        f"FROM range({ROWS})"
    )
    _write(spark, "UPDATE lake.bench.base SET name = 'updated' WHERE id < 100")  # delete files, as MERGEs leave
    location = spark.sql("SELECT file FROM lake.bench.base.metadata_log_entries ORDER BY timestamp DESC").first()[0]
    path = Path(location.removeprefix("file:"))
    metadata = json.loads(path.read_text())

    for i in range(3):  # warm-up: the session's first commits pay for class loading and JIT compilation
        _write(
            spark, f"INSERT INTO lake.bench.base VALUES ({ROWS + i}, 'n', 'e', 1.00, current_timestamp(), 'c', NULL)"
        )
        _write(spark, f"UPDATE lake.bench.base SET name = 'w' WHERE id = {i}")
    print("| snapshots | metadata file | append (1 row): median, min-max | MERGE (1 key): median, min-max |")
    print("|---|---|---|---|")
    for count in counts:
        name = f"lake.bench.t{count}"
        copied = path.with_name(f"99999-bench-{count}.metadata.json")
        copied.write_text(json.dumps(_with_snapshots(metadata, max(0, count - len(metadata["snapshots"])))))
        spark.sql(f"CALL lake.system.register_table(table => 'bench.t{count}', metadata_file => 'file:{copied}')")
        appends, merges = [], []
        for i in range(args.commits):
            appends.append(
                _write(
                    spark,
                    f"INSERT INTO {name} VALUES ({ROWS + i}, 'n', 'e', 1.00, current_timestamp(), 'c', "
                    f"array(CAST({ROWS + i} AS DECIMAL(38,0))))",
                )
            )
            merges.append(
                _write(
                    spark,
                    f"MERGE INTO {name} t USING (SELECT CAST({i} AS BIGINT) AS id, 'merged' AS name) s "
                    "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.name = s.name",
                )
            )
        size = (
            Path(
                spark.sql(f"SELECT file FROM {name}.metadata_log_entries ORDER BY timestamp DESC")
                .first()[0]
                .removeprefix("file:")
            )
            .stat()
            .st_size
        )
        print(
            f"| {count:,} | {size / 2**20:.1f} MiB | {statistics.median(appends):.2f} s, "
            f"{min(appends):.2f}-{max(appends):.2f} | {statistics.median(merges):.2f} s, "
            f"{min(merges):.2f}-{max(merges):.2f} |",
            flush=True,
        )
    spark.stop()


if __name__ == "__main__":
    main()
