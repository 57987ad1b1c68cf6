"""Figures for small batches from Kafka in one warm Spark session (what `cdclake ingest --follow` runs).

Usage: .venv/bin/python benchmarks/bench_small_batches.py [--batches 5] [--lake DIR] [--jobs]
[--figures-json FILE]

Starts the local stack if it is down and registers the stack's PostgreSQL connector (spec ``postgres``, the
demo's tables, transaction metadata on). In one SparkSession, first drains what the topics hold and prints the
lake tables' rows, then ``--batches`` times: writes one demo workload (inserts, updates, deletes, multi-table
transactions; 36 records with BEGIN/END) on keys no record of the topics holds and, from the second batch on, a
transaction that updates and deletes rows the previous batch stored (19 records), waits 3 s, runs one batch
(:func:`cdclake.ingest.runner.ingest_from_kafka`). Prints each batch's wall time, its phases, the time spent
inside Spark jobs (from Spark's status API), the generated classes it compiled (Spark's codegen metrics) and the
CPU it took: the driver JVM's, of which its JIT compiler threads', and the Python process's (from ``/proc``), then
the median of the warm batches; ``--jobs`` also lists each batch's Spark jobs (time, and what each does: its
phase, table and step); ``--figures-json`` writes the median to a file (``bench_real_shape.py --goals`` reads
it). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any


def _jobs(ui: str, app: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs", timeout=10) as response:
        return json.load(response)


def _job_seconds(job: dict[str, object]) -> float:
    start = datetime.strptime(str(job["submissionTime"])[:23], "%Y-%m-%dT%H:%M:%S.%f")
    end = job.get("completionTime")
    return (datetime.strptime(str(end)[:23], "%Y-%m-%dT%H:%M:%S.%f") - start).total_seconds() if end else 0.0


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds process ``pid`` has used, all its threads' and its JIT compiler threads' (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = jit = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended
            continue
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        used = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        total += used
        jit += used if "CompilerThre" in name else 0.0
    return total, jit


def postgres_source(poll_interval_ms: int | None = None) -> tuple[Any, Any]:
    """The local stack (started if down, without Airflow, whose scheduled runs would share the two cores) with the
    demo schema and its PostgreSQL connector (spec ``postgres``) registered and running; returns the stack and
    the spec. ``poll_interval_ms``: the connector is registered again with this Debezium ``poll.interval.ms``, and
    with the spec's own again when the process exits."""
    from cdclake.connect.lifecycle import ensure_connector, register_connector, wait_running
    from cdclake.connectors import load_spec
    from cdclake.demo.database import apply_demo_schema
    from cdclake.stack import Stack

    stack = Stack()
    stack.up(airflow=False)
    apply_demo_schema(stack)
    spec = load_spec("postgres")
    if poll_interval_ms is not None:
        spec = spec.model_copy(update={"poll_interval_ms": poll_interval_ms})
    client = stack.connect_client()
    if poll_interval_ms is not None:
        import atexit

        register_connector(client, spec, stack.database_endpoint(spec))
        own = load_spec("postgres")
        atexit.register(register_connector, client, own, stack.database_endpoint(own))
    else:
        ensure_connector(client, spec, stack.database_endpoint(spec))
    wait_running(client, spec.name)
    return stack, spec


def fresh_id_base(spark: Any, sql: Any) -> int:
    """A multiple of 10,000 above every id of the source's customers and orders and of their lake tables and
    tombstones after the drain (every key the topics carry): the workloads' keys are new, as a real table's
    inserts are. A base an earlier run used would make each batch's deletes re-delete keys the drain left a
    tombstone of (a MERGE of the tombstones that new keys do not need). A table the topics have no records of
    (a fresh stack's) has no lake table yet."""
    tops = [int(sql.scalar(f"SELECT coalesce(max(id), 0) FROM inventory.{t}")) for t in ("customers", "orders")]
    for table in ("customers", "orders"):
        for name in (f"lake.pg.inventory.{table}", f"lake.pg.inventory.{table}__cdc_deletes"):
            if spark.catalog.tableExists(name):
                tops.append(int(spark.sql(f"SELECT coalesce(max(id), 0) AS top FROM {name}").collect()[0]["top"]))
    return (max(tops) // 10_000 + 1) * 10_000


def touch_stored(sql: Any, previous: int) -> None:
    """Change rows the lake stores, in one transaction: update the customers and orders the batch on id base
    ``previous`` left (5 and 8 rows) and delete one of each (MERGEs of updates and deletes, tombstones appended)."""
    upper = previous + 1000
    with sql.transaction():
        sql.execute("UPDATE inventory.customers SET tier = 'gold' WHERE id >= %s AND id < %s", [previous, upper])
        sql.execute("UPDATE inventory.orders SET status = 'shipped' WHERE id >= %s AND id < %s", [previous, upper])
        sql.execute("DELETE FROM inventory.customers WHERE id = %s", [previous + 1])
        sql.execute("DELETE FROM inventory.orders WHERE id = %s", [previous + 101])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--lake", type=Path, default=None, help="embedded lake (default: a temporary one)")
    parser.add_argument(
        "--jobs", action="store_true", help="also list each batch's Spark jobs: time, phase, table and step"
    )
    parser.add_argument("--figures-json", type=Path, help="also write the warm batches' median there (JSON)")
    args = parser.parse_args()

    from cdclake.demo.database import app_sql
    from cdclake.demo.workload import run_workload
    from cdclake.ingest.runner import ingest_from_kafka
    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session

    stack, spec = postgres_source()
    lake = args.lake or Path(tempfile.mkdtemp(prefix="bench-small-"))
    spark = build_spark_session(
        "bench-small-batches",
        lake=LakeConfig.embedded(lake),
        extra_conf={"spark.ui.enabled": "true", "spark.ui.port": "4045"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    ui, app = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    try:
        t0 = time.monotonic()
        drained = ingest_from_kafka(spark, spec.name)
        print(f"drain: {drained.records} records in {time.monotonic() - t0:.1f} s (the session's first batch)")
        for table in ("customers", "orders"):
            name = f"lake.pg.inventory.{table}"
            rows = spark.table(name).count() if spark.catalog.tableExists(name) else "no table, so no"
            print(f"{name}: {rows} rows after the drain")
        with app_sql(stack, "postgres") as sql:
            base = fresh_id_base(spark, sql)
        walls: list[float] = []
        records: list[int] = []
        for i in range(args.batches):
            with app_sql(stack, "postgres") as sql:
                run_workload(sql, "inventory.customers", "inventory.orders", base + 10_000 * i)
                if i:
                    touch_stored(sql, base + 10_000 * (i - 1))
            time.sleep(3)
            before = {j["jobId"] for j in _jobs(ui, app)}
            compiled = compilations.getCount()
            jvm0, jit0 = _cpu_seconds(jvm_pid)
            py0 = time.process_time()
            t0 = time.monotonic()
            summary = ingest_from_kafka(spark, spec.name)
            wall = time.monotonic() - t0
            py = time.process_time() - py0
            jvm, jit = (after - before for after, before in zip(_cpu_seconds(jvm_pid), (jvm0, jit0), strict=True))
            compiled = compilations.getCount() - compiled
            walls.append(wall)
            records.append(summary.records)
            new = [j for j in _jobs(ui, app) if j["jobId"] not in before]
            phases = ", ".join(f"{k} {v:.2f}" for k, v in summary.phases.items() if v >= 0.005)
            print(
                f"batch {i + 1}: {summary.records} records, {wall:.2f} s; {len(new)} Spark jobs, "
                f"{sum(_job_seconds(j) for j in new):.2f} s inside them; {compiled} classes compiled; "
                f"CPU: JVM {jvm:.2f} s (its JIT compilers {jit:.2f} s), Python {py:.2f} s; phases: {phases}"
            )
            if args.jobs:
                for job in sorted(new, key=lambda j: int(str(j["jobId"]))):
                    print(f"    job {job['jobId']}: {_job_seconds(job):.2f} s  {job.get('description') or job['name']}")
        if len(walls) > 1:
            print(f"median of batches 2-{len(walls)}: {statistics.median(walls[1:]):.2f} s")
            if args.figures_json:
                figures = {"median_s": statistics.median(walls[1:]), "warm_batches": len(walls) - 1,
                           "records": statistics.median(records[1:])}  # fmt: skip
                args.figures_json.write_text(json.dumps(figures))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
