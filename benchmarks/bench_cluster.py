"""The real-shape backlog on the cluster profile with 1 and 2 Spark workers, beside ``local[*]`` (prints figures;
asserts nothing but the lake's content).

Each configuration gets a fresh backlog of ``--events`` change events (:mod:`real_shape`: the captured
PostgreSQL or MariaDB table's ten columns, JsonConverter schemas on, transaction metadata on, transactions of 1-5
events, 70/25/5 inserts/updates/deletes; one partition per topic, as the connector's are), produced to the local
stack's broker, then ingested by one ``cdclake ingest`` process, timed by wall clock with its JVM's start
(:func:`bench_real_shape.ingest`, which also checks the lake against the backlog's final content):

* ``local[*]``: the default profile's way, into a fresh embedded lake;
* ``cluster, N workers``: the same command with ``cdclake stack env --profile cluster``'s variables, so the driver
  runs here and the executors on the standalone workers, committing through the REST catalog into the S3
  warehouse. The script starts the profile's services when they are not running, adds or stops workers to have
  N, and stops afterwards what it started. Each worker offers ``CDC_SPARK_WORKER_CORES`` cores (2) and
  ``CDC_SPARK_WORKER_MEMORY`` (3g); executors get ``spark.executor.memory=2g`` unless ``CDC_SPARK_CONF`` says
  otherwise.

On one machine every configuration shares the same cores: the figures show what the profile costs (executor
start-up, S3 and REST round trips) and what a second worker changes when it brings no new core.

Usage: ``.venv/bin/python benchmarks/bench_cluster.py [--events 1000000] [--kind postgres] [--workers 1,2]``
(local stack up, ``make cluster-jars`` done).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_real_shape import ingest, produce  # noqa: E402
from real_shape import Workload  # noqa: E402

from cdclake.settings import MAX_SPARK_WORKERS  # noqa: E402
from cdclake.stack import Stack, StackConfig  # noqa: E402
from cdclake.stack.cluster import lake_environment, master_state  # noqa: E402


def _cluster(config: StackConfig, workers: int) -> tuple[Stack, list[str]]:
    """The cluster profile's services with exactly ``workers`` workers; returns the stack and what this started."""
    stack = Stack(replace(config, stack_profile="cluster", spark_workers=workers))
    names = stack.cluster_names
    before = {name for name in names if stack.services[name].process.running()}
    stack.up(airflow=False)
    for index in range(workers + 1, MAX_SPARK_WORKERS + 1):  # a worker beyond N would take executors too
        stack.services[f"spark-worker-{index}"].process.stop(timeout_s=60)
    return stack, [name for name in names if name not in before]


def _alive_workers(config: StackConfig) -> list[dict[str, Any]]:
    return [w for w in master_state(config).get("workers", []) if w.get("state") == "ALIVE"]


def _row(where: str, events: int, result: dict[str, Any], note: str) -> str:
    summary = result["summary"]
    phases = ", ".join(f"{name} {seconds:.1f}" for name, seconds in summary["phases_s"].items())
    return (
        f"| {where} | {events / result['wall_s']:,.0f} ({result['wall_s']:.1f} s) | {phases} | "
        f"{result['peak_rss'] / 2**30:.2f} GiB | {result['lake']['rows']:,} rows, equal | {note} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--kind", default="postgres", choices=("postgres", "mariadb"))
    parser.add_argument("--workers", default="1,2", help="worker counts to run, comma-separated (1 to 4)")
    args = parser.parse_args()
    config = StackConfig.from_env()
    work = Path(tempfile.mkdtemp(prefix="cdclake-bench-cluster-"))

    def backlog() -> Workload:
        workload = Workload(args.kind, f"cl{args.kind[:2]}{uuid.uuid4().hex[:6]}", args.events, True)
        records, size, seconds = produce(config.kafka_bootstrap, workload)
        print(f"backlog {workload.prefix}: {records:,} records ({size / 2**20:,.0f} MiB) produced in {seconds:.1f} s")
        return workload

    rows = [_row("local[*], embedded lake", args.events, ingest(backlog(), work), "driver does everything")]
    print(rows[-1], flush=True)
    started: list[str] = []
    stack = None
    try:
        for workers in (int(n) for n in args.workers.split(",")):
            stack, new = _cluster(config, workers)
            started += [name for name in new if name not in started]
            alive = _alive_workers(stack.config)
            cores = sum(int(w["cores"]) for w in alive)
            env = lake_environment(stack.config, stack.secrets)
            env["CDC_SPARK_CONF"] = os.environ.get("CDC_SPARK_CONF", "spark.executor.memory=2g")
            result = ingest(backlog(), work, cluster_env=env)
            rows.append(
                _row(
                    f"cluster, {len(alive)} worker(s), {cores} executor cores",
                    args.events,
                    result,
                    "peak RSS: the driver's; executors on the workers",
                )
            )
            print(rows[-1], flush=True)
    finally:
        if stack is not None:
            for name in reversed(started):
                stack.services[name].process.stop(timeout_s=60)
    print(
        f"\n{args.events:,} {args.kind} change events (schemas on, transaction metadata on), one `cdclake ingest`"
        f" process each, on {os.cpu_count()} cores\n"
    )
    print("| where | events/s (wall, JVM start included) | phases (s) | peak RSS | lake | note |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
