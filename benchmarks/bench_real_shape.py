"""Ingestion of real-shape Debezium backlogs, end to end, one ``cdclake ingest`` process per backlog (prints
figures; asserts nothing but the lake's content).

For each cell (connector x JsonConverter schemas on/off) a backlog of ``--events`` change events is generated
from the project's own captures (:mod:`real_shape`: ten columns of the captured PostgreSQL / MariaDB table,
transaction metadata on, transactions of 1-5 events, 70/25/5 inserts/updates/deletes) and produced to the local
stack's broker (one partition per topic, as the connector's topics have by default). Then, with nothing else
running:

* **ingest**: ``cdclake ingest --spec <generated spec> --lake <fresh dir> --json`` in its own process; its wall
  clock (JVM start included) gives events/s; the job's phases come from its summary; peak RSS is the process
  tree's (Python driver + JVM), sampled every 0.2 s. The lake is then checked against the backlog's final
  content: every live key once, each row its key's last write (the row's local-timestamp column tells which
  event wrote it);
* **plain Spark**, the limit of the read: one process (the same Spark, jars and driver settings) reads every
  cell's topics with Spark's Kafka source twice: once straight into the ``noop`` sink (what reading the bytes
  costs), once parsing each value with ``from_json`` (the schema inferred from one of its records) before the
  ``noop`` sink; its per-cell times (in a warm session) and its wall clock (JVM start included) are printed
  beside the ingest's;
* **peers** (``--peers``), each in its own process(es) over the same table topic, timed by wall clock with their
  JVM's start: ``cdclake ingest`` into an append-mode table (checked: one row per change event); the Apache
  Iceberg Kafka Connect sink on a standalone Connect worker (:mod:`peer_sink`, append-only; timed until its
  table holds every change event); the tutorial Structured Streaming pipeline with ``foreachBatch`` MERGE
  (:mod:`peer_tutorial`; its lake compared with the backlog's final content as ours is, and its column types
  with ours). A second table gives each one's events/s and cdclake's ratio to it.

``--goals`` then runs the benchmarks of the other goals, each in its own process with its output passed through
(``bench_latency.py --rate 1000 --seconds 120``, ``bench_small_batches.py --batches 14``, ``bench_ingest.py
--skip-e2e``: about 10 minutes), and prints the goals table (:mod:`goals`): every goal, this run's figure and
whether it is met or by how much it is missed. The throughput, peer and memory goals are judged on the PostgreSQL
cell with schemas on (and the most RSS of any cell).

``--quick`` (what ``make test`` runs, tests/integration/test_bench_quick.py, with ``--peers --goals``): 2,000
events of two cells, one run, the peers on the first cell; its goals table judges nothing (a smaller backlog than
the goals', the other goals' benchmarks not run). ``--write-docs`` replaces the tables between the ``real-shape``
markers of docs/benchmarks.md, and with ``--goals`` the table between its ``goals`` markers.

Usage: ``.venv/bin/python benchmarks/bench_real_shape.py [--events 1000000] [--kinds postgres,mariadb]
[--schemas on,off] [--runs 1] [--quick] [--skip-plain] [--peers] [--goals] [--write-docs]`` (local stack up;
``--peers`` builds the sink's plugin directory with ``make peer-jars`` when it is missing).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_sink  # noqa: E402
from bench_ingest import PeakRss  # noqa: E402
from bench_ingest import produce as produce_records  # noqa: E402
from goals import headline_cell, render_goals  # noqa: E402
from real_shape import VERSION_COLUMN, Workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CDCLAKE = str(Path(sys.executable).parent / "cdclake")
DOCS = ROOT / "docs" / "benchmarks.md"
MARK_BEGIN, MARK_END = "<!-- real-shape:begin -->", "<!-- real-shape:end -->"
GOALS_BEGIN, GOALS_END = "<!-- goals:begin -->", "<!-- goals:end -->"
#: What ``--goals`` runs after the cells, each writing its headline figures to the file given by ``--figures-json``.
GOAL_BENCHMARKS = {
    "latency": ["bench_latency.py", "--rate", "1000", "--seconds", "120"],
    "small_batch": ["bench_small_batches.py", "--batches", "14"],
    "merge_growth": ["bench_ingest.py", "--skip-e2e"],
}


def produce(bootstrap: str, workload: Workload) -> tuple[int, int, float]:
    """Produce the workload's records; returns (records, bytes of keys and values, seconds)."""
    size = 0

    def chunks() -> Iterator[list[dict[str, Any]]]:
        nonlocal size
        for chunk in workload.records():
            size += sum(len(key) + len(value or "") for _, key, value in chunk)
            yield [{"topic": t, "key": k, "value": v} for t, k, v in chunk]

    t0 = time.monotonic()
    count = produce_records(bootstrap, chunks(), headers=list(workload.template.headers))
    return count, size, time.monotonic() - t0


def _yaml(spec: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(spec, sort_keys=False)


def ingest(
    workload: Workload, work: Path, mode: str = "upsert", cluster_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One ``cdclake ingest`` process over the backlog into a table in ``mode``; its wall clock, peak RSS, summary
    and lake check (raises when the lake is not what the backlog makes it).

    ``cluster_env``: the cluster profile's variables (``cdclake stack env --profile cluster``): the job runs on its
    Spark master into its REST catalog's S3 lake, instead of ``local[*]`` into a fresh embedded lake; the peak RSS
    is then the driver's alone (the executors are the worker's processes).
    """
    from cdclake.lake import LakeConfig
    from cdclake.settings import Settings

    schema_file = None
    if not workload.schemas:
        schema_file = work / f"{workload.prefix}.schema.json"
        schema_file.write_text(json.dumps(workload.template.schema_file()))
    spec_path = work / f"{workload.prefix}-{mode}.yaml"
    spec_path.write_text(_yaml(workload.spec(schema_file, mode)))
    lake = work / f"lake-{workload.prefix}-{mode}-{uuid.uuid4().hex[:6]}"  # each run's own
    if cluster_env:
        env, where = dict(os.environ, **cluster_env, CDC_LOG_LEVEL="WARNING"), []
        config = LakeConfig.from_settings(Settings.from_env(cluster_env))
    else:
        env, where = dict(os.environ, CDC_LAKE_DIR=str(lake), CDC_LOG_LEVEL="WARNING"), ["--lake", str(lake)]
        config = LakeConfig.embedded(lake)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [CDCLAKE, "ingest", "--spec", str(spec_path), *where, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rss = PeakRss(proc.pid, interval_s=0.2).start()
    out, err = proc.communicate(timeout=3600)
    wall = time.monotonic() - t0
    peak = rss.stop()
    if proc.returncode != 0:
        raise SystemExit(f"cdclake ingest of {workload.prefix} failed ({proc.returncode}):\n{err[-4000:]}")
    summary = json.loads(out)
    table = config.open_catalog().load_table(f"{workload.prefix}.{workload.data_collection}")
    check = check_state(workload, table) if mode == "upsert" else check_appended(workload, table)
    if not check["equal"]:
        raise SystemExit(f"cdclake ingest ({mode}) of {workload.prefix}: the lake is not the backlog's: {check}")
    return {"wall_s": wall, "peak_rss": peak, "summary": summary, "lake": check}


def _micros(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        return (value.replace(tzinfo=None) - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1)
    return int(value)


def check_state(workload: Workload, table: Any) -> dict[str, Any]:
    """An upserted table against the backlog's final content: every live key once, each row the key's last write
    (its :data:`~real_shape.VERSION_COLUMN`)."""
    version = VERSION_COLUMN[workload.kind]
    data = table.scan(selected_fields=("id", version)).to_arrow()
    ids = data.column("id").to_pylist()
    got = dict(zip(ids, map(_micros, data.column(version).to_pylist()), strict=True))
    expected = workload.last_writes()
    found = {
        "rows": len(ids),
        "duplicates": len(ids) - len(got),
        "missing": len(expected.keys() - got.keys()),
        "extra": len(got.keys() - expected.keys()),
        "stale": sum(1 for key in expected.keys() & got.keys() if got[key] != expected[key]),
    }
    types = {f.name: str(f.field_type) for f in table.schema().fields}
    return {**found, "equal": not any(found[k] for k in ("duplicates", "missing", "extra", "stale")), "types": types}


def check_appended(workload: Workload, table: Any) -> dict[str, Any]:
    """An append-mode table against the backlog: one row per change event."""
    rows = table.scan(selected_fields=("id",)).to_arrow().num_rows
    return {"rows": rows, "equal": rows == workload.data_events}


def tutorial(workload: Workload, work: Path, bootstrap: str, sample: str) -> dict[str, Any]:
    """The tutorial pipeline (peer_tutorial.py) over the backlog's table topic in its own process; its wall clock
    and how its lake compares with the backlog's final content."""
    lake = work / f"lake-{workload.prefix}-tutorial"
    cmd = [
        sys.executable, str(Path(__file__).with_name("peer_tutorial.py")), "--bootstrap", bootstrap,
        "--topic", workload.topic, "--lake", str(lake), "--table", "tutorial.items", "--sample", sample,
        "--kind", workload.kind, "--schemas", "on" if workload.schemas else "off",
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the tutorial pipeline failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    from cdclake.lake import LakeConfig

    check = check_state(workload, LakeConfig.embedded(lake).open_catalog().load_table("tutorial.items"))
    return {"wall_s": wall, **json.loads(proc.stdout.strip().splitlines()[-1]), "lake": check}


def sink(workload: Workload, work: Path, bootstrap: str) -> dict[str, Any]:
    """The Iceberg Kafka Connect sink (peer_sink.py) over the backlog's table topic; its wall clock and rows."""
    from cdclake.stack import StackConfig

    result = peer_sink.run(
        bootstrap=bootstrap,
        jvm_dir=StackConfig.from_env().jvm_dir,
        topic=workload.topic,
        events=workload.data_events,
        schemas=workload.schemas,
        work=work / f"sink-{workload.prefix}",
    )
    return {**result, "lake": {"rows": result["rows"], "equal": result["rows"] == workload.data_events}}


def plain_spark(topics: list[str], samples: dict[str, str]) -> dict[str, Any]:
    """Run this script's ``--plain`` mode in its own process: seconds per topic group and the process's wall clock."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, __file__, "--plain-json", json.dumps({"topics": topics, "samples": samples})],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"plain Spark failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.monotonic() - t0
    return result


def _plain_main(spec: dict[str, Any]) -> None:
    """``--plain-json``: read each topic with Spark's Kafka source into noop, then again with ``from_json`` of its
    values."""
    from pyspark.sql import functions as F

    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session
    from cdclake.stack import StackConfig

    spark = build_spark_session("bench-plain", lake=LakeConfig.embedded(Path(tempfile.mkdtemp())))
    spark.sparkContext.setLogLevel("ERROR")
    bootstrap = StackConfig.from_env().kafka_bootstrap
    seconds: dict[str, float] = {}
    read_s: dict[str, float] = {}
    for topic in spec["topics"]:
        sample = spec["samples"][topic]
        records = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        t0 = time.monotonic()
        records.write.format("noop").mode("overwrite").save()
        read_s[topic] = time.monotonic() - t0
        t0 = time.monotonic()
        (
            records.select(F.from_json(F.col("value").cast("string"), F.schema_of_json(F.lit(sample))).alias("v"))
            .write.format("noop")
            .mode("overwrite")
            .save()
        )
        seconds[topic] = time.monotonic() - t0
    spark.stop()
    print(json.dumps({"seconds": seconds, "read_s": read_s}))


def _cells(args: argparse.Namespace) -> list[tuple[str, bool]]:
    if args.quick:
        return [("postgres", True), ("mariadb", False)]
    schemas = {"on": True, "off": False}
    return [(k, schemas[s]) for k in args.kinds.split(",") for s in args.schemas.split(",")]


def _spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--kinds", default="postgres,mariadb")
    parser.add_argument("--schemas", default="on,off")
    parser.add_argument("--runs", type=int, default=1, help="ingest runs per cell (each on a fresh lake)")
    parser.add_argument("--quick", action="store_true", help="2,000 events of two cells (make test)")
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="per cell also run cdclake's append mode, the Iceberg Kafka Connect sink and the tutorial pipeline",
    )
    parser.add_argument(
        "--goals",
        action="store_true",
        help="then run the latency, small-batch and MERGE-growth benchmarks and print every goal's figure and "
        "verdict (without --quick: about 10 more minutes)",
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--plain-json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_json:
        _plain_main(json.loads(args.plain_json))
        return
    from cdclake.stack import StackConfig

    events = 2_000 if args.quick else args.events
    bootstrap = StackConfig.from_env().kafka_bootstrap
    work = Path(tempfile.mkdtemp(prefix="cdclake-bench-real-"))
    rows: list[dict[str, Any]] = []
    samples: dict[str, str] = {}
    for kind, schemas in _cells(args):
        workload = Workload(kind, f"rs{kind[:2]}{'on' if schemas else 'off'}{uuid.uuid4().hex[:4]}", events, schemas)
        records, size, produced_s = produce(bootstrap, workload)
        print(
            f"{kind} schemas {'on' if schemas else 'off'}: produced {records:,} records ({size / 2**20:,.0f} MiB, "
            f"{size / records:,.0f} B each; {workload.counts}) in {produced_s:.1f} s",
            flush=True,
        )
        first = next(workload.__class__(kind, workload.prefix, 1, schemas).records())
        samples[workload.topic] = next(v for t, _, v in first if t == workload.topic and v)
        samples[workload.tx_topic] = next(v for t, _, v in first if t == workload.tx_topic)
        runs = []
        for _ in range(args.runs):
            result = ingest(workload, work)
            summary = result["summary"]
            print(
                f"  ingest: {summary['records']:,} records in {result['wall_s']:.1f} s wall = "
                f"{events / result['wall_s']:,.0f} events/s; phases {summary['phases_s']}; "
                f"peak RSS {result['peak_rss'] / 2**30:.2f} GiB; lake {result['lake']['rows']:,} rows = the "
                "backlog's live keys",
                flush=True,
            )
            runs.append(result)
        peers = None
        if args.peers and not (args.quick and rows):  # --quick: the peers on the first cell only
            peers = {
                "append": ingest(workload, work, "append"),
                "sink": sink(workload, work, bootstrap),
                "tutorial": tutorial(workload, work, bootstrap, samples[workload.topic]),
            }
            for name, peer in peers.items():
                print(f"  {PEER_NAMES[name]}: {peer['wall_s']:.1f} s wall = {events / peer['wall_s']:,.0f} "
                      f"events/s; lake {peer['lake']}", flush=True)  # fmt: skip
        rows.append({"kind": kind, "schemas": schemas, "workload": workload, "records": records, "size": size,
                     "runs": runs, "peers": peers})  # fmt: skip
    plain = None
    if not args.skip_plain:
        plain = plain_spark(sorted(samples), samples)
        print(f"plain Spark: read {plain['read_s']}, with from_json {plain['seconds']} (process wall "
              f"{plain['wall_s']:.1f} s)")  # fmt: skip
    table = render(rows, plain, events)
    if args.peers:
        table += "\n\n" + render_peers(rows, events)
    print(table)
    goals = None
    if args.goals:
        figures = {"events": events, "cells": cell_figures(rows, events), "peers": peer_figures(rows, events)}
        for name, command in GOAL_BENCHMARKS.items():
            figures[name] = None if args.quick else run_for_figures(command, work)
        goals = render_goals(figures)
        print(
            "\nGoals"
            + (" (--quick: the latency, small-batch and MERGE-growth benchmarks not run)" if args.quick else "")
        )
        print(goals)
    if args.write_docs:
        text = _between(DOCS.read_text(), MARK_BEGIN, MARK_END, table)
        DOCS.write_text(_between(text, GOALS_BEGIN, GOALS_END, goals) if goals else text)
        print(f"updated {DOCS}")


def _between(text: str, begin: str, end: str, table: str) -> str:
    """``text`` with what lies between the markers ``begin`` and ``end`` replaced by ``table``."""
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + table + "\n" + text[stop:]


def run_for_figures(command: list[str], work: Path) -> dict[str, Any]:
    """Run a benchmark of this folder (``command``: its script and arguments) with ``--figures-json``, its output
    passed through; returns the figures it wrote."""
    out = work / f"figures-{Path(command[0]).stem}.json"
    print(f"\n$ {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, str(Path(__file__).with_name(command[0])), *command[1:], "--figures-json",
                    str(out)], check=True)  # fmt: skip
    return json.loads(out.read_text())


def cell_figures(rows: list[dict[str, Any]], events: int) -> list[dict[str, Any]]:
    """Each cell's figures for the goals table (:func:`goals.goal_rows`): its median events/s and peak RSS."""
    return [
        {
            "kind": row["kind"],
            "schemas": row["schemas"],
            "events_per_s": statistics.median(events / r["wall_s"] for r in row["runs"]),
            "peak_rss_gib": max(r["peak_rss"] for r in row["runs"]) / 2**30,
            "lake_equal": all(r["lake"]["equal"] for r in row["runs"]),
        }
        for row in rows
    ]


def peer_figures(rows: list[dict[str, Any]], events: int) -> dict[str, Any] | None:
    """The peers' events/s on the headline cell (PostgreSQL, schemas on, else the first with peers), and the tutorial
    lake's verdict; None without peers."""
    row = headline_cell([r for r in rows if r["peers"]])
    if row is None:
        return None
    rate = {name: events / peer["wall_s"] for name, peer in row["peers"].items()}
    verdict = _tutorial_verdict(row["peers"]["tutorial"]["lake"], row["runs"][0]["lake"]["types"])
    return {
        "upsert": statistics.median(events / r["wall_s"] for r in row["runs"]),
        **rate,
        "tutorial_lake": verdict.split(" (", 1)[0],
    }


def render(rows: list[dict[str, Any]], plain: dict[str, Any] | None, events: int) -> str:
    lines = [
        "| connector | schemas | records (MiB) | ingest, events/s (wall) | phases (s, median) | peak RSS | plain Spark "
        "read + noop (warm) | plain Spark read + from_json + noop (warm) | lake equals the backlog |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        runs, w = row["runs"], row["workload"]
        rate = _spread([events / r["wall_s"] for r in runs])
        wall = _spread([r["wall_s"] for r in runs], "{:.1f}")
        phases: dict[str, list[float]] = {}
        for r in runs:
            for name, value in r["summary"]["phases_s"].items():
                phases.setdefault(name, []).append(value)
        phase_text = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in phases.items() if max(v) >= 0.05)
        rss = max(r["peak_rss"] for r in runs) / 2**30
        read_text = plain_text = "-"
        if plain:
            r = plain["read_s"][w.topic] + plain["read_s"][w.tx_topic]
            read_text = f"{r:.1f} s = {events / r:,.0f} events/s"
            s = plain["seconds"][w.topic] + plain["seconds"][w.tx_topic]
            plain_text = f"{s:.1f} s = {events / s:,.0f} events/s"
        lines.append(
            f"| {row['kind']} | {'on' if row['schemas'] else 'off'} | {row['records']:,} ({row['size'] / 2**20:,.0f}) "
            f"| {rate} ({wall} s) | {phase_text} | {rss:.2f} GiB | {read_text} | {plain_text} | "
            f"{all(r['lake']['equal'] for r in runs)} ({runs[0]['lake']['rows']:,} rows) |"
        )
    if plain:
        lines.append(f"\nPlain Spark's process, JVM start included: {plain['wall_s']:.1f} s for every cell's topics.")
    return "\n".join(lines)


PEER_NAMES = {
    "append": "cdclake ingest, append mode",
    "sink": "Iceberg Kafka Connect sink (append)",
    "tutorial": "tutorial Structured Streaming MERGE",
}


def _tutorial_verdict(tutorial: dict[str, Any], ours: dict[str, str]) -> str:
    """Whether the tutorial's rows are the backlog's last writes, and which columns it types otherwise than
    cdclake (which types them as the source does)."""
    rows = "rows: yes" if tutorial["equal"] else "rows: no (" + ", ".join(
        f"{v:,} {k}" for k, v in tutorial.items() if k in ("missing", "extra", "stale", "duplicates") and v
    ) + ")"  # fmt: skip
    wrong = [f"{name} {kind} for {ours[name]}" for name, kind in tutorial["types"].items() if ours.get(name) != kind]
    return f"{rows}; types: " + (
        "yes" if not wrong else f"no, {len(wrong)} of {len(tutorial['types'])} ({'; '.join(wrong)})"
    )


def render_peers(rows: list[dict[str, Any]], events: int) -> str:
    """The peers' table: each one's events/s by wall clock (its JVM start included) and cdclake's ratio to it."""
    lines = [
        "| connector | schemas | cdclake upsert, events/s | cdclake append, events/s | Iceberg sink (append), "
        "events/s | append / sink | tutorial MERGE, events/s | upsert / tutorial | tutorial's lake equals the "
        "backlog |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if not row["peers"]:
            continue
        upsert = statistics.median(events / r["wall_s"] for r in row["runs"])
        rate = {name: events / peer["wall_s"] for name, peer in row["peers"].items()}
        verdict = _tutorial_verdict(row["peers"]["tutorial"]["lake"], row["runs"][0]["lake"]["types"])
        lines.append(
            f"| {row['kind']} | {'on' if row['schemas'] else 'off'} | {upsert:,.0f} | {rate['append']:,.0f} | "
            f"{rate['sink']:,.0f} | {rate['append'] / rate['sink']:.2f}x | {rate['tutorial']:,.0f} | "
            f"{upsert / rate['tutorial']:.2f}x | {verdict} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
