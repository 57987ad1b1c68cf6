"""The same ingestion job on the cluster profile: a Spark standalone master and worker, the Iceberg REST catalog and the
S3 warehouse of s3proxy, all started by `cdclake stack up --profile cluster` beside the shared stack.

Two captures of their own (PostgreSQL and MariaDB, topics of 3 and 2 partitions) are ingested, pointed at the cluster
only by the variables `cdclake stack env --profile cluster` prints: PostgreSQL's by `cdclake ingest` from Kafka,
MariaDB's recorded by `cdclake capture` and replayed by `cdclake replay`, at once. Their lakes equal their sources,
read by cdclake's reconciliation and, from outside, by pyiceberg and DuckDB as `cdclake lake info --json` says; the
maintenance job runs every procedure on their tables and they still do; the Spark master (its JSON and its web UI
in a browser) shows the applications ran on the worker's executors. Stopped, the profile leaves no process behind
(`cdclake stack down` of a cluster profile with a running executor: tests/integration/test_stack_lifecycle.py). A
driver killed between two tables' commits is redone exactly once by the next run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from lake_readers import duckdb_rows, pyiceberg_rows
from owned_sources import (
    CDCLAKE,
    OwnedSource,
    assert_lake_equals_source,
    create_owned_tables,
    owned_spec,
    remove_source,
)

from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.topics import topic_end_offsets, wait_for_records
from cdclake.demo.workload import run_workload
from cdclake.lake import LakeConfig
from cdclake.lake.names import spec_table_identifier
from cdclake.settings import Settings
from cdclake.stack import Stack
from cdclake.stack.cluster import lake_environment, master_state

pytestmark = [pytest.mark.integration("stack"), pytest.mark.cluster]

RUN = secrets.token_hex(3)
MAINTENANCE_JOB = Path(__file__).resolve().parents[2] / "jobs" / "maintenance.py"


@pytest.fixture(scope="module")
def cluster(stack: Stack) -> Iterator[Stack]:
    """The shared stack with the cluster profile's services added; those this fixture started are stopped after."""
    on_cluster = Stack(replace(stack.config, stack_profile="cluster", spark_workers=1))
    extra = on_cluster.cluster_names
    running = {name for name in extra if on_cluster.services[name].process.running()}
    on_cluster.up(airflow=False)  # the stack's Airflow stays on the default profile's lake
    yield on_cluster
    if running:
        return  # started by hand: left running
    for name in reversed(extra):
        on_cluster.services[name].process.stop(timeout_s=60)
    # stopped as `stack down` stops them: whole process trees, the executors the worker launched included
    assert _cluster_processes(on_cluster) == []


#: What the command line of a cluster profile's process holds: its servers' main classes, and Spark's executors.
CLUSTER_PROGRAMS = (
    "org.apache.spark.deploy.master.Master",
    "org.apache.spark.deploy.worker.Worker",
    "CoarseGrainedExecutorBackend",
    "dev.cdclake.rest.RestCatalogLauncher",
    "s3proxy",
)


def _cluster_processes(stack: Stack) -> list[str]:
    """Processes of this stack's cluster profile still alive: a cluster program run from the state directory (by
    command line or working directory, as the executors run in their worker's)."""
    state = str(stack.config.state_dir)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if any(p in cmdline for p in CLUSTER_PROGRAMS) and (state in cmdline or cwd.startswith(state)):
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@pytest.fixture(scope="module")
def env(cluster: Stack) -> dict[str, str]:
    """What `eval "$(cdclake stack env --profile cluster)"` sets for cdclake: the lake and the Spark master."""
    printed = subprocess.run(
        [CDCLAKE, "stack", "env", "--profile", "cluster"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CDC_STACK_DIR": str(cluster.config.state_dir)},
    ).stdout
    assert lake_environment(cluster.config, cluster.secrets).items() <= _exports(printed).items()
    return lake_environment(cluster.config, cluster.secrets)


def _exports(printed: str) -> dict[str, str]:
    import shlex

    pairs = (shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in printed.splitlines())
    return dict(pairs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def lake(env: dict[str, str]) -> LakeConfig:
    config = LakeConfig.from_settings(Settings.from_env(env))
    assert config.kind == "rest" and config.warehouse == "s3://warehouse/"
    return config


@pytest.fixture(scope="module")
def sources(cluster: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, OwnedSource]]:
    """A PostgreSQL and a MariaDB capture of their own, connectors running, snapshot records in Kafka."""
    client = cluster.connect_client()
    apply_demo_schema(cluster)
    tmp = tmp_path_factory.mktemp("cluster-specs")
    owned = {which: owned_spec(tmp, which, f"cl_{RUN}", extra=_partitioned(n)) for which, n in PARTITIONS.items()}
    try:
        for src in owned.values():
            create_owned_tables(cluster, src)
            ensure_connector(client, src.spec, cluster.database_endpoint(src.spec))
        for src in owned.values():
            wait_running(client, src.spec.name)
            wait_for_records(cluster.config.kafka_bootstrap, dict.fromkeys(src.data_topics.values(), 1))
        yield owned
    finally:
        for which, src in owned.items():
            remove_source(cluster, client, which, src.spec, (src.customers, src.orders))


#: Partitions of each capture's topics: Kafka Connect creates them so (``topic.creation.default.*`` in the
#: spec's ``extra``, as a user scaling out sets them), and Debezium's records spread over them by key.
PARTITIONS = {"postgres": 3, "mariadb": 2}


#: Customers inserted at once beside the workload: 40 keys leave a partition of 3 empty with p ≈ 3·(2/3)^40.
SPREAD = 40


def _partitioned(partitions: int) -> dict[str, int]:
    return {"topic.creation.default.partitions": partitions, "topic.creation.default.replication.factor": 1}


def _partitions_holding_records(cluster: Stack, src: OwnedSource) -> int:
    """How many partitions of the customers' topic hold records."""
    from cdclake.ingest.sources import KafkaRecordSource

    topic = src.data_topics[src.customers]
    _, latest = KafkaRecordSource(cluster.config.kafka_bootstrap, [re.escape(topic)]).watermarks()
    return sum(1 for (t, _), end in latest.items() if t == topic and end > 0)


def _workload(cluster: Stack, src: OwnedSource, base: int) -> None:
    topics = src.data_topics
    before = topic_end_offsets(cluster.config.kafka_bootstrap, list(topics.values()))
    with app_sql(cluster, src.which) as sql:
        events = run_workload(sql, src.customers, src.orders, base)
        # and enough keys that every partition of the customers' topic holds some
        rows = ", ".join(f"({base + 500 + i}, 'spread {i}', NULL, 'EU')" for i in range(SPREAD))
        sql.execute(f"INSERT INTO {src.customers} (id, name, email, region) VALUES {rows}")
        events[src.customers] += SPREAD
    wait_for_records(cluster.config.kafka_bootstrap, {topics[t]: before[topics[t]] + n for t, n in events.items()})


def _ingest(src: OwnedSource, env: dict[str, str], tmp: Path, *extra_env: tuple[str, str]) -> subprocess.Popen[str]:
    return _cdclake(["ingest", "--spec", str(src.spec_path), "--json"], env, tmp, *extra_env)


def _replay(src: OwnedSource, env: dict[str, str], tmp: Path) -> subprocess.Popen[str]:
    """`cdclake replay` of every record of the source's topics, recorded by `cdclake capture` (executors on the
    same machine read the file; on a real cluster it would be on shared storage)."""
    records = tmp / f"{src.spec.name}.jsonl"
    subprocess.run(
        [CDCLAKE, "capture", "--prefix", src.spec.topic_prefix, "--out", str(records)],
        capture_output=True,
        check=True,
        env={**os.environ, "CDC_LOG_LEVEL": "WARNING"},
    )
    return _cdclake(["replay", str(records), "--spec", str(src.spec_path), "--json"], env, tmp)


def _cdclake(args: list[str], env: dict[str, str], tmp: Path, *extra_env: tuple[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CDCLAKE, *args],
        env={**os.environ, **env, "CDC_LOG_LEVEL": "WARNING", **dict(extra_env)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp,
    )


def _finished(proc: subprocess.Popen[str]) -> dict[str, object]:
    """The summary a run printed (``--json``): ingest's, or replay's last batch."""
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-2000:] + err[-4000:]
    printed = json.loads(out)
    return dict(printed[-1] if isinstance(printed, list) else printed)


def _source_ids(cluster: Stack, src: OwnedSource) -> list[tuple[int]]:
    with app_sql(cluster, src.which) as sql:
        agg = "string_agg(id::text, ',')" if src.which == "postgres" else "group_concat(id)"
        ids = sql.scalar(f"SELECT {agg} FROM {src.customers}")
    return sorted((int(i),) for i in str(ids).split(","))


def test_both_sources_ingested_at_once_on_the_cluster_equal_their_sources_read_from_outside(
    cluster: Stack, sources: dict[str, OwnedSource], env: dict[str, str], lake: LakeConfig, tmp_path: Path
) -> None:
    for n, src in enumerate(sources.values()):
        _workload(cluster, src, 10_000 * (n + 1))
    # at once, two writers of one REST catalog: PostgreSQL's ingest from Kafka, MariaDB's capture replayed
    runs = [_ingest(sources["postgres"], env, tmp_path), _replay(sources["mariadb"], env, tmp_path)]
    summaries = [_finished(proc) for proc in runs]
    assert [s["status"] for s in summaries] == ["committed", "committed"]
    for src in sources.values():
        # multi-partition topics: each partition's records decoded by their own tasks, per-key order kept
        assert _partitions_holding_records(cluster, src) == PARTITIONS[src.which]
        assert_lake_equals_source(src, lake)
    # read from outside, as `cdclake lake info --json` says: pyiceberg through the REST catalog, DuckDB too
    info = json.loads(
        subprocess.run(
            [CDCLAKE, "lake", "info", "--json"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **env},
        ).stdout
    )
    assert info["kind"] == "rest"
    for src in sources.values():
        table = f"{src.spec.topic_prefix}.{src.customers}"
        assert table in info["duckdb"]["tables"], sorted(info["duckdb"]["tables"])
        expected = _source_ids(cluster, src)
        assert len(expected) > 1
        assert pyiceberg_rows(info, table, ["id"]) == expected
        assert duckdb_rows(info, table, "id") == expected
    # Iceberg maintenance of both sources' tables, on the cluster too: every procedure ran, nothing changed
    summary_path = tmp_path / "maintenance.json"
    maintained = subprocess.run(
        [
            sys.executable,
            str(MAINTENANCE_JOB),
            *(a for src in sources.values() for a in ("--spec", str(src.spec_path))),
            "--rewrite-min-input-files",
            "2",
            "--skip-audit",
            "--summary-json",
            str(summary_path),
        ],  # fmt: skip
        env={**os.environ, **env, "CDC_LOG_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert maintained.returncode == 0, [line for line in maintained.stderr.splitlines() if " failed" in line]
    summary = json.loads(summary_path.read_text())
    assert (summary["failed"], summary["skipped"]) == ({}, []), summary
    tables = {spec_table_identifier(src.spec, t) for src in sources.values() for t in (src.customers, src.orders)}
    assert tables <= set(summary["tables"]), summary["tables"].keys()
    for src in sources.values():
        assert_lake_equals_source(src, lake)
    # the warehouse is in the object store, the applications ran on the worker's executors
    assert any((cluster.services["s3proxy"].home / "data" / "warehouse").rglob("*.parquet"))
    master = master_state(cluster.config)
    names = ("cdclake-ingest", "cdclake-maintenance")
    apps = {app["id"] for app in master["completedapps"] if app["name"] in names}
    worker = requests.get(f"http://{cluster.config.host}:{cluster.config.spark_ui_port + 1}/json/", timeout=10).json()
    assert len(apps & {e["appid"] for e in worker["finishedexecutors"]}) >= 3
    # and the master's web UI says so to a person: the worker alive, the applications completed
    shown = _master_page(cluster, tmp_path)
    assert worker["id"] in shown and "ALIVE" in shown
    assert "REST URL" not in shown  # no unauthenticated submission server
    assert all(app in shown for app in apps), (apps, shown[:2000])


def _master_page(cluster: Stack, tmp_path: Path) -> str:
    """The Spark master's web UI in Debian's Chromium: its text, and a screenshot (``CDC_TEST_ARTIFACTS`` keeps it)."""
    from playwright.sync_api import sync_playwright

    from cdclake.stack.debian import CHROMIUM

    assert CHROMIUM.exists(), "Debian's chromium is not installed: run `make install` (it installs it as root)"
    out = Path(os.environ.get("CDC_TEST_ARTIFACTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(cluster.config.spark_ui_url, wait_until="load")
            page.screenshot(path=str(out / "spark-master.png"), full_page=True)
            return str(page.inner_text("body"))
        finally:
            browser.close()


def test_a_driver_killed_between_two_tables_commits_is_redone_exactly_once_on_the_cluster(
    cluster: Stack, sources: dict[str, OwnedSource], env: dict[str, str], lake: LakeConfig, tmp_path: Path
) -> None:
    src = sources["postgres"]
    _workload(cluster, src, 50_000)
    crashed = _ingest(src, env, tmp_path, ("CDC_FAULT_AT", "table:1"))
    out, err = crashed.communicate(timeout=600)
    assert crashed.returncode == 137, out[-2000:] + err[-4000:]
    assert "injected crash at table:1" in err
    # the rerun redoes the planned batch: the table committed before the crash is not applied twice (a run after
    # it finding nothing new is the live stack's test, tests/reliability/test_faults.py, after-commit)
    redo = _finished(_ingest(src, env, tmp_path))
    assert (redo["status"], redo["redo"]) == ("committed", True), redo
    assert_lake_equals_source(src, lake)
