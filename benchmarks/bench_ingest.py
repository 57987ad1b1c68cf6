"""Ingestion figures (prints them; asserts nothing).

1. End to end: a Kafka backlog of ``--events`` Debezium PostgreSQL envelopes (schemas on; keys drawn
   from ``--distinct`` of the events, i.e. 25% by default; a mix of c/u/d) is produced to the local
   stack's broker, then one ingestion batch reads it with the Spark Kafka source, decodes it and
   MERGEs it into a fresh lake. Reports events/s and the time per phase.
2. MERGE growth: the same ``--merge-batch`` events (keys drawn from a quarter of ``--small``) applied to
   upsert tables that already hold ``--small`` and ``--large`` rows (written directly with Spark); reports
   the apply time of each. ``--spread-keys``: the large table's batch draws its keys from a quarter of
   the large table instead (4x more distinct keys to update). ``--merge-mode copy-on-write``: the tables'
   MERGEs, updates and deletes rewrite the data files they touch instead of writing position deletes (the
   upsert tables' own ``merge-on-read``); after each batch, a scan of the whole table (the sum of a column, the
   position deletes applied) is timed too.
3. Peak RSS of the whole process tree (Python driver + JVM), sampled every 0.5 s.

``--figures-json`` also writes the MERGE growth's apply times to a file (``bench_real_shape.py --goals`` reads it).

Usage: ``.venv/bin/python benchmarks/bench_ingest.py [--events 1000000] [--merge-batch 100000]
[--small 100000] [--large 10000000] [--spread-keys] [--merge-mode MODE] [--skip-e2e] [--skip-merge] [--driver-memory 2g]
[--produce-only | --backlog PREFIX] [--figures-json FILE]`` (local stack up for the e2e part). The documented e2e figure is
``--produce-only`` then ``--backlog PREFIX --skip-merge`` in a second process: a batch started right after
producing shares the 2 cores with the broker still writing the backlog.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "ingest"))

from events import PgTable  # noqa: E402


def _tree_rss(pid: int) -> int:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class PeakRss:
    """Peak RSS of a process tree (``pid``, default this process, and its descendants), sampled every
    ``interval_s``; a context manager, or :meth:`start` and :meth:`stop`."""

    def __init__(self, pid: int | None = None, interval_s: float = 0.5) -> None:
        self.pid, self.interval_s, self.peak = pid or os.getpid(), interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(self.pid))
            self._stop.wait(self.interval_s)

    def start(self) -> PeakRss:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak

    def __enter__(self) -> PeakRss:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def workload(prefix: str, events: int, distinct: int, seed: int = 1) -> list[dict]:
    return [r for chunk in workload_chunks(prefix, events, distinct, seed) for r in chunk]


def workload_chunks(prefix: str, events: int, distinct: int, seed: int = 1, chunk: int = 20_000):
    """Yield the workload's records in chunks (a 1M-event backlog never sits in memory at once)."""
    rng = random.Random(seed)
    table = PgTable(prefix=prefix, table="bench")
    live: set[int] = set()
    for i in range(events):
        if table.records and len(table.records) >= chunk:
            yield table.take()
        key = rng.randrange(distinct)
        lsn = 1_000 + i
        if key in live and rng.random() < 0.1:
            table.delete({"id": key}, lsn=lsn, tombstone=False)
            live.discard(key)
        elif key in live:
            table.update({"id": key, "name": f"n{i}", "qty": i % 1000}, lsn=lsn)
        else:
            table.create({"id": key, "name": f"n{i}", "qty": i % 1000}, lsn=lsn)
            live.add(key)
    yield table.take()


def produce(bootstrap: str, chunks: Iterable[list[dict]], headers: list[tuple[str, str]] | None = None) -> int:
    """Produce the chunks' records (``{"topic", "key", "value"}``) to partition 0 of their topics, each topic
    created with one partition when first seen, with ``headers`` on every record; returns the number of records."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    count, topics = 0, set()
    for records in chunks:
        new = {r["topic"] for r in records} - topics
        if new:
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in sorted(new)]).values():
                future.result(30)
            topics |= new
        for r in records:
            while True:
                try:
                    producer.produce(r["topic"], key=r["key"], value=r["value"], partition=0, headers=headers)
                    break
                except BufferError:  # local queue full: let it drain
                    producer.poll(0.5)
            producer.poll(0)
        count += len(records)
    producer.flush(600)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--distinct", type=float, default=0.25, help="distinct keys as a fraction of events")
    parser.add_argument("--merge-batch", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=10_000_000)
    parser.add_argument(
        "--spread-keys", action="store_true", help="MERGE batch keys from a quarter of each table, not the same batch"
    )
    parser.add_argument(
        "--merge-mode",
        choices=("merge-on-read", "copy-on-write"),
        default="merge-on-read",
        help="the MERGE growth tables' write.merge/update/delete.mode (cdclake creates merge-on-read tables)",
    )
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--skip-merge", action="store_true")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (the JVM heap; local mode)")
    parser.add_argument(
        "--produce-only", action="store_true", help="produce the e2e backlog, print its --backlog prefix, stop"
    )
    parser.add_argument(
        "--backlog",
        metavar="PREFIX",
        help="run the e2e batch on a backlog produced earlier (--produce-only) instead of producing one now: "
        "the batch then does not share the machine with the broker still flushing what was just produced",
    )
    parser.add_argument("--figures-json", type=Path, help="also write the MERGE growth's apply times there (JSON)")
    args = parser.parse_args()

    from cdclake.decode.records import records_from_dicts
    from cdclake.ingest.batch import run_batch
    from cdclake.ingest.config import SourceConfig
    from cdclake.ingest.sources import FrameRecordSource, KafkaRecordSource, source_topic_patterns
    from cdclake.ingest.tables import POSITION_CEILING
    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session
    from cdclake.stack import StackConfig

    lake_dir = Path(tempfile.mkdtemp(prefix="cdclake-bench-"))
    with PeakRss() as rss:
        spark = build_spark_session(
            "bench-ingest", lake=LakeConfig.embedded(lake_dir), extra_conf={"spark.driver.memory": args.driver_memory}
        )
        spark.sparkContext.setLogLevel("ERROR")
        if not args.skip_e2e:
            prefix = args.backlog or f"bench{uuid.uuid4().hex[:6]}"
            bootstrap = StackConfig.from_env().kafka_bootstrap
            if not args.backlog:
                t0 = time.monotonic()
                produced = produce(
                    bootstrap, workload_chunks(prefix, args.events, max(1, int(args.events * args.distinct)))
                )
                print(f"produced {produced:,} records in {time.monotonic() - t0:.1f}s (--backlog {prefix})")
                if args.produce_only:
                    return
            source = SourceConfig(name=prefix, topic_prefix=prefix)
            t0 = time.monotonic()
            summary = run_batch(spark, source, KafkaRecordSource(bootstrap, source_topic_patterns(prefix)))
            elapsed = time.monotonic() - t0
            print(
                f"e2e: {summary.records:,} events Kafka -> committed Iceberg in {elapsed:.1f}s = "
                f"{summary.records / elapsed:,.0f} events/s; phases {summary.as_dict()['phases_s']}"
            )
        applied: dict[int, float] = {}
        if not args.skip_merge:
            for size in (args.small, args.large):
                prefix = f"m{size}_{uuid.uuid4().hex[:4]}"
                table = f"lake.{prefix}.inventory.bench"
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{prefix}.inventory")
                t0 = time.monotonic()
                # an existing table of `size` rows, as the job would have created it
                setup = workload(prefix, 1, 1)
                run_batch(
                    spark,
                    SourceConfig(name=prefix, topic_prefix=prefix),
                    FrameRecordSource(records_from_dicts(spark, setup), source_topic_patterns(prefix)),
                )
                modes = ", ".join(f"'write.{op}.mode' = '{args.merge_mode}'" for op in ("merge", "update", "delete"))
                spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({modes})")
                spark.range(1, size).selectExpr(
                    "id",
                    "concat('n', id) AS name",
                    "CAST(id % 1000 AS INT) AS qty",
                    "'r' AS _cdc_op",
                    "current_timestamp() AS _cdc_source_ts",
                    "array(CAST(0 AS DECIMAL(38,0)), CAST(id AS DECIMAL(38,0))) AS _cdc_position",
                    "CAST(NULL AS STRING) AS _cdc_tx_id",
                    f"'{prefix}.inventory.bench' AS _cdc_topic",
                    "0 AS _cdc_partition",
                    "CAST(0 AS BIGINT) AS _cdc_offset",
                    "current_timestamp() AS _cdc_ingested_at",
                ).writeTo(table).option(
                    # the position ceiling every commit of the ingestion carries: without it, the batch would scan
                    # the table for its greatest position, as it does after another writer's commit
                    f"snapshot-property.{POSITION_CEILING}",
                    json.dumps([0, size - 1]),
                ).append()
                print(f"table of {size:,} rows written in {time.monotonic() - t0:.1f}s")
                # the same batch for both tables (keys from a quarter of the small table), unless --spread-keys
                # draws them from a quarter of each table (more distinct keys to update in the large one)
                batch = workload(
                    prefix, args.merge_batch, max(1, (size if args.spread_keys else args.small) // 4), seed=2
                )
                for r in batch:
                    r["offset"] += 1
                frame = records_from_dicts(spark, setup + batch)
                t0 = time.monotonic()
                summary = run_batch(
                    spark,
                    SourceConfig(name=prefix, topic_prefix=prefix),
                    FrameRecordSource(frame, source_topic_patterns(prefix)),
                )
                merged = time.monotonic() - t0
                applied[size] = summary.phases["apply"]
                t0 = time.monotonic()
                spark.sql(f"SELECT sum(qty) FROM {table}").collect()
                print(
                    f"MERGE ({args.merge_mode}) of {args.merge_batch:,} events into {size:,} rows: batch {merged:.1f}s, "
                    f"apply {summary.phases['apply']:.1f}s; a scan of the table then {time.monotonic() - t0:.1f}s"
                )
        spark.stop()
    print(f"peak RSS (driver + JVM): {rss.peak / 2**30:.2f} GiB")
    if args.figures_json and applied:
        figures = {"small_rows": args.small, "large_rows": args.large, "small_s": applied[args.small],
                   "large_s": applied[args.large]}  # fmt: skip
        args.figures_json.write_text(json.dumps(figures))
    shutil.rmtree(lake_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
