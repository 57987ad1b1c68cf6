"""Latency of ``cdclake ingest --follow`` under a steady load: from a row's commit in PostgreSQL to the Iceberg
snapshot that first holds it (prints figures; asserts nothing but that every row arrived).

The whole path is real: the local stack's PostgreSQL, its Debezium connector (spec ``postgres``, transaction
metadata on), Kafka, and one ``cdclake ingest --follow --poll 1`` process (what the ``cdc_follow__postgres`` DAG
runs) writing to a fresh embedded lake. Once the follower has drained the topics' backlog, the same load warms it
up for ``--warmup`` seconds (until the lake holds those rows: a fresh driver's first batches of updates compile
and plan what a follower then reuses for as long as it runs), then a load of ``--rate`` change events/s runs for
``--seconds``: every 10 ms a transaction of 10 events on ``inventory.customers`` (7 inserts of new keys, 2
updates and 1 delete of earlier ones), its commit time taken when ``COMMIT`` returns. Only this load is measured.

A row's visibility is read from the table's history afterwards: the first snapshot that added a data file
holding its key (its ``timestamp-ms``, the writer's commit time). Latency is that minus the row's commit
time, over every inserted row still live at the end (one inserted and deleted within a batch never shows) and
committed after the oldest snapshot the follower kept (on a run longer than its ``--keep-snapshots`` commits,
the earlier rows' own snapshots are expired; the script says how many rows that leaves out). The
follower is stopped once the table holds all of them. The latency is also split at the row's insert record's
Kafka timestamp (set by Connect's producer): source commit -> in Kafka (Debezium's ``poll.interval.ms`` wait, the
producer) and in Kafka -> visible (the follower). Both clocks are this machine's.

Usage: ``.venv/bin/python benchmarks/bench_latency.py [--rate 1000] [--seconds 60] [--warmup 15]
[--compact-every N] [--debezium-poll-ms MS] [--figures-json FILE]`` (starts the stack, without Airflow, if it is down; ``--debezium-poll-ms`` registers the
connector again with that ``poll.interval.ms`` instead of the spec's for the run, and with the spec's after it). Prints the latency percentiles (whole and
split), the batches' walls and the median of each phase, then each batch's records, wall, apply and upkeep
(compaction, snapshot expiry) time, and what the table holds for a reader at the end (its files, a full scan's
time). ``--figures-json`` also writes the percentiles to a file (``bench_real_shape.py --goals`` reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_small_batches import postgres_source  # noqa: E402

CDCLAKE = str(Path(sys.executable).parent / "cdclake")
TABLE = "inventory.customers"
SEQUENCE = "inventory.bench_latency_keys"


def load(stack: Any, rate: int, seconds: float) -> tuple[dict[int, float], int]:
    """Run the load; returns the commit time (epoch seconds) of each inserted key still live at the end (a key
    inserted and deleted within one batch never shows in the table) and the change events made."""
    from cdclake.demo.database import app_sql

    per_tx, commits, live, events = 10, {}, [], 0
    rng = random.Random(7)
    interval = per_tx / rate
    with app_sql(stack, "postgres") as sql:
        next_id = fresh_keys(sql)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            fresh = list(range(next_id, next_id + 7))
            next_id += 7
            with sql.transaction():
                for key in fresh:
                    sql.execute(
                        f"INSERT INTO {TABLE} (id, name, email, region) VALUES (%s, %s, %s, %s)",
                        [key, f"load {key}", f"l{key}@example.com", "EU" if key % 2 else "US"],
                    )
                for key in rng.sample(live[-2000:], min(2, len(live))):
                    events += sql.execute(f"UPDATE {TABLE} SET name = %s WHERE id = %s", [f"updated {key}", key])
                if len(live) > 100:
                    events += sql.execute(f"DELETE FROM {TABLE} WHERE id = %s", [live[0]])
                    del commits[live.pop(0)]
            committed = time.time()
            commits.update(dict.fromkeys(fresh, committed))
            events += len(fresh)
            live.extend(fresh)
            n += 1
            time.sleep(max(0.0, t0 + n * interval - time.monotonic()))
    return commits, events


def fresh_keys(sql: Any, reserve: int = 10_000_000) -> int:
    """The first of ``reserve`` keys no run has used: the topic keeps earlier runs' keys, which a fresh lake
    would already hold. Reserved through a sequence (not captured)."""
    sql.execute(f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE} START 100000000")
    return int(sql.scalar(f"SELECT setval('{SEQUENCE}', nextval('{SEQUENCE}') + %s)", [reserve])) - reserve + 1


def batches(lines: list[tuple[float, str]], since: float) -> list[tuple[float, dict[str, Any]]]:
    """The committed batches the follower reported after ``since``: its JSON Lines (``--json``) with a batch id,
    each with the time it was read."""
    out = []
    for at, line in lines:
        if at > since and line.startswith("{"):
            summary = json.loads(line)
            if summary.get("batch_id") is not None and "stopped_by" not in summary:
                out.append((at, summary))
    return out


def drained(lines: list[tuple[float, str]], since: float, ends: dict[tuple[str, int], int]) -> bool:
    """The follower read all there was when it started: the ranges of its batches after ``since`` reach ``ends``
    (the source topics' end offsets then), or it reported no new records (topics with nothing to drain)."""
    reached: dict[tuple[str, int], int] = {}
    for _, summary in batches(lines, since):
        for topic, parts in (summary.get("offsets") or {}).items():
            for partition, (_, end) in parts.items():
                reached[(topic, int(partition))] = max(reached.get((topic, int(partition)), 0), end)
    idle = any(
        at > since and line.startswith("{") and json.loads(line).get("status") == "no-new-records" for at, line in lines
    )
    return idle or all(reached.get(tp, 0) >= end for tp, end in ends.items())


def in_kafka(bootstrap: str, topic: str, start: int, keys: set[int], timeout_s: float = 120.0) -> dict[int, float]:
    """When each of ``keys`` first reached ``topic`` (partition 0) at or after offset ``start``: its record's Kafka
    timestamp (epoch seconds; set by Connect's producer when the connector's task hands it the record)."""
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as CTP

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
         "enable.partition.eof": True, "log_level": 0}
    )  # fmt: skip
    arrived: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([CTP(topic, 0, start)])
        done = False
        while not done and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=5000, timeout=1.0):
                error = message.error()
                if error is not None:
                    done = done or error.code() == KafkaError._PARTITION_EOF
                    continue
                if message.key() is None:
                    continue
                key = json.loads(message.key())
                key = int((key.get("payload", key) or {}).get("id", -1))
                if key in keys and key not in arrived:
                    arrived[key] = message.timestamp()[1] / 1000
    finally:
        consumer.close()
    return arrived


def in_lake(lake: Path, identifier: str, keys: Iterable[int]) -> bool:
    """Whether the lake's table holds every key of ``keys``."""
    from pyiceberg.exceptions import NoSuchTableError

    from cdclake.lake import LakeConfig

    try:
        table = LakeConfig.embedded(lake).open_catalog().load_table(identifier)
    except NoSuchTableError:
        return False
    return set(keys) <= set(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def wait_in_lake(
    lake: Path,
    identifier: str,
    keys: Iterable[int],
    follower: subprocess.Popen[str],
    lines: list[tuple[float, str]],
    what: str,
    poll_s: float,
    timeout_s: float = 300.0,
) -> None:
    """Wait until the lake's table holds every key of ``keys``; exits with the follower's last lines when it ended or
    ``timeout_s`` passed first (``what``: what it did not do)."""
    keys, since = list(keys), time.monotonic()
    while not in_lake(lake, identifier, keys):
        if follower.poll() is not None or time.monotonic() - since > timeout_s:
            raise SystemExit(f"the follower did not {what}:\n" + "\n".join(line for _, line in lines[-20:]))
        time.sleep(poll_s)


def measurable(table: Any, commits: dict[int, float]) -> dict[int, float]:
    """The rows whose first snapshot the table still has: those committed at or after its oldest snapshot. A
    follower expires all but its newest snapshots (``--keep-snapshots``): on a long run, an earlier row's own
    snapshot is gone, and the first one left that holds it is a later update's or compaction's."""
    oldest = min(s.timestamp_ms for s in table.snapshots()) / 1000
    return {key: at for key, at in commits.items() if at >= oldest}


def first_visible(table: Any, keys: set[int]) -> dict[int, float]:
    """Each key's first snapshot (epoch seconds) that added a data file holding it (a compaction's rewrite
    shows no row first)."""
    import pyarrow.parquet as pq
    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus

    seen: dict[int, float] = {}
    for snapshot in sorted(table.snapshots(), key=lambda s: s.sequence_number):
        if snapshot.summary is not None and snapshot.summary.operation.value == "replace":
            continue
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.status != ManifestEntryStatus.ADDED:
                    continue
                path = entry.data_file.file_path.removeprefix("file:")
                for key in pq.read_table(path, columns=["id"]).column("id").to_pylist():
                    if key in keys and key not in seen:
                        seen[key] = snapshot.timestamp_ms / 1000
    return seen


def reader_view(table: Any) -> str:
    """What the follower leaves a reader of ``table``: its live data and delete files, and one full scan's time
    (pyiceberg, which opens every file and applies every delete file)."""
    files = table.inspect.files().select(["content", "file_size_in_bytes"]).to_pylist()
    data = sorted(f["file_size_in_bytes"] for f in files if f["content"] == 0)
    deletes = sum(1 for f in files if f["content"] != 0)
    t0 = time.monotonic()
    rows = table.scan().to_arrow().num_rows
    return (
        f"{len(data):,} data files (median {data[len(data) // 2] / 1024:.0f} KiB), {deletes:,} delete files; "
        f"a full scan of its {rows:,} rows {time.monotonic() - t0:.1f} s"
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=1000, help="change events per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load runs")
    parser.add_argument(
        "--warmup", type=float, default=15.0, help="seconds of the same load before it, not measured (0: none)"
    )
    parser.add_argument(
        "--compact-every", type=int, default=None, help="the follower's --compact-every (default: its default)"
    )
    parser.add_argument(
        "--debezium-poll-ms",
        type=int,
        default=None,
        help="register the connector with this poll.interval.ms (default: the spec's)",
    )
    parser.add_argument("--figures-json", type=Path, help="also write the latency percentiles there (JSON)")
    args = parser.parse_args()

    from cdclake.ingest.sources import KafkaRecordSource, source_topic_patterns
    from cdclake.lake import LakeConfig
    from cdclake.lake.names import catalog_identifier, spec_table_identifier

    stack, spec = postgres_source(poll_interval_ms=args.debezium_poll_ms)
    topic = f"{spec.topic_prefix}.{TABLE}"
    print(f"connector {spec.connect_name}: poll.interval.ms {spec.poll_interval_ms}", flush=True)

    work = Path(tempfile.mkdtemp(prefix="cdclake-bench-latency-"))
    lake, summary_file = work / "lake", work / "summary.json"
    cmd = [CDCLAKE, "ingest", "--spec", "postgres", "--lake", str(lake), "--follow", "--poll", "1", "--json",
           "--summary-json", str(summary_file)]  # fmt: skip
    if args.compact_every is not None:
        cmd += ["--compact-every", str(args.compact_every)]
    env = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1")
    follower = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            lines.append((time.monotonic(), line.rstrip()))

    threading.Thread(target=read, daemon=True).start()
    t0 = time.monotonic()
    earliest, backlog = KafkaRecordSource(
        spec.kafka_bootstrap_servers, source_topic_patterns(spec.topic_prefix)
    ).watermarks()
    backlog = {tp: end for tp, end in backlog.items() if end > earliest.get(tp, 0)}
    while not drained(lines, t0, backlog):  # the topics' backlog
        if follower.poll() is not None or time.monotonic() - t0 > 1800:
            raise SystemExit("the follower did not drain the backlog:\n" + "\n".join(line for _, line in lines))
        time.sleep(0.5)
    print(f"backlog drained after {time.monotonic() - t0:.1f} s ({len(lines)} lines)", flush=True)
    identifier = catalog_identifier(spec_table_identifier(spec, TABLE))
    if args.warmup > 0:
        warmed = time.monotonic()
        warm, _ = load(stack, args.rate, args.warmup)
        wait_in_lake(lake, identifier, warm.keys(), follower, lines, "apply the warm-up", poll_s=1)
        warmups = batches(lines, warmed)
        print(
            f"warm-up: {len(warmups)} batches in {time.monotonic() - warmed:.1f} s, walls "
            + ", ".join(f"{sum(b['phases_s'].values()):.2f}" for _, b in warmups)
            + " s",
            flush=True,
        )
    print("load starts", flush=True)

    _, ends = KafkaRecordSource(spec.kafka_bootstrap_servers, [topic]).watermarks()
    started = time.monotonic()
    commits, events = load(stack, args.rate, args.seconds)
    ended = time.monotonic()
    print(f"load: {events:,} change events committed in {ended - started:.1f} s", flush=True)
    wait_in_lake(lake, identifier, commits.keys(), follower, lines, "catch up", poll_s=2)
    follower.send_signal(signal.SIGTERM)
    follower.wait(120)

    result = json.loads(summary_file.read_text())
    table = LakeConfig.embedded(lake).open_catalog().load_table(identifier)
    measured = measurable(table, commits)
    if len(measured) < len(commits):
        print(
            f"{len(commits) - len(measured):,} of {len(commits):,} inserted rows committed before the oldest snapshot "
            "the follower kept (--keep-snapshots): not measured",
            flush=True,
        )
    visible = first_visible(table, set(measured))
    if len(visible) != len(measured):
        raise SystemExit(f"{len(measured) - len(visible)} of {len(measured)} inserted rows never became visible")
    latency = [visible[key] - measured[key] for key in measured]
    arrived = in_kafka(spec.kafka_bootstrap_servers, topic, ends.get((topic, 0), 0), set(measured))
    to_kafka = [arrived[key] - measured[key] for key in measured if key in arrived]
    from_kafka = [visible[key] - arrived[key] for key in measured if key in arrived]
    loaded = [b for _, b in batches(lines, started) if b["records"]]  # the load's batches
    walls = [sum(b["phases_s"].values()) for b in loaded]
    print(
        f"source commit -> visible in Iceberg, {len(latency):,} inserted rows at {args.rate:,} events/s: "
        f"p50 {_percentile(latency, 0.5):.2f} s, p90 {_percentile(latency, 0.9):.2f} s, "
        f"p99 {_percentile(latency, 0.99):.2f} s, max {max(latency):.2f} s"
    )
    if args.figures_json:
        percentiles = {f"p{p}_s": _percentile(latency, p / 100) for p in (50, 90, 99)}
        args.figures_json.write_text(json.dumps({**percentiles, "rate": args.rate, "rows": len(latency)}))
    if to_kafka:
        print(
            f"  of which source commit -> in Kafka (Debezium, Connect's producer), {len(to_kafka):,} rows: "
            f"p50 {_percentile(to_kafka, 0.5):.2f} s, p90 {_percentile(to_kafka, 0.9):.2f} s, "
            f"p99 {_percentile(to_kafka, 0.99):.2f} s; in Kafka -> visible (the follower): "
            f"p50 {_percentile(from_kafka, 0.5):.2f} s, p90 {_percentile(from_kafka, 0.9):.2f} s, "
            f"p99 {_percentile(from_kafka, 0.99):.2f} s"
        )
    if walls:
        print(
            f"batches under load: {len(walls)}, wall median {statistics.median(walls):.2f} s "
            f"(min {min(walls):.2f}, max {max(walls):.2f}), records median {statistics.median(b['records'] for b in loaded):,.0f}"
        )
        names = dict.fromkeys(name for b in loaded for name in b["phases_s"])
        phases = {name: statistics.median(b["phases_s"].get(name, 0.0) for b in loaded) for name in names}
        print("phase medians: " + ", ".join(f"{name} {s:.2f} s" for name, s in phases.items()))
        for i, b in enumerate(loaded, 1):
            print(
                f"  batch {i}: {b['records']:,} records, {sum(b['phases_s'].values()):.2f} s "
                f"(apply {b['phases_s'].get('apply', 0.0):.2f} s, upkeep {b['phases_s'].get('upkeep', 0.0):.2f} s)"
            )
    print(f"{TABLE} as the follower left it: {reader_view(table)}")
    print(f"follower: {result['committed_batches']} batches, {result['records']:,} records, stopped by "
          f"{result['stopped_by']}")  # fmt: skip


if __name__ == "__main__":
    main()
