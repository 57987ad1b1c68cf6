"""Airflow as the product's face, on the real local stack: its own API server, scheduler, DAG processor and
triggerer (``cdclake stack up``), the demo driven through it, scheduled ingest runs, the CDC view in a real
browser, and one ingest of a source at a time.

The tests share one demo run (module order matters): ``cdclake demo`` first, the rest look at what it left.
At the end the DAGs the demo turned on are paused again, and the Airflow components stop (when this module
started them, ``stack_airflow``), so that the rest of the suite runs without them beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from cdclake.cli.lake import _all_tables
from cdclake.connectors import load_spec
from cdclake.demo.database import app_sql
from cdclake.demo.pipeline import DEMO_DAGS, INGEST_DAGS
from cdclake.monitor import LakeMonitor
from cdclake.reconcile.audit import latest_results
from cdclake.stack import Stack
from cdclake.stack.config import secret_names
from cdclake.stack.debian import CHROMIUM

pytestmark = pytest.mark.integration("airflow")

CDCLAKE = str(Path(sys.executable).parent / "cdclake")
SHOP = ("customers", "products", "orders", "order_items")
#: where the browser test's screenshots go (kept when the variable is set)
ARTIFACTS_ENV = "CDC_TEST_ARTIFACTS"


@pytest.fixture(scope="module")
def airflow(stack_airflow: Stack) -> Iterator[Any]:
    """The stack's Airflow REST client (its components running for this module); the demo's DAGs are paused
    again afterwards."""
    client = stack_airflow.airflow.client()
    yield client
    for dag_id in DEMO_DAGS:
        if client.dag(dag_id) is not None:
            client.set_paused(dag_id, True)


@pytest.fixture(scope="module")
def demo(stack: Stack, airflow: Any) -> dict[str, Any]:
    """One `cdclake demo` run (a short one), as a user runs it."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [CDCLAKE, "demo", "--rows", "12", "--duration", "20", "--timeout", "900"],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "COLUMNS": "200"},
    )
    return {"rc": proc.returncode, "output": proc.stdout + proc.stderr, "seconds": time.monotonic() - t0}


def test_the_demo_through_airflow_ends_with_every_table_equal(demo: dict[str, Any], stack: Stack) -> None:
    output = demo["output"]
    assert demo["rc"] == 0, output[-6000:]
    assert "every table of the lake equals its source" in output
    # the verdicts the cdc_reconcile DAG recorded in the lake: every shop table of both sources, equal
    rows = latest_results(LakeMonitor(stack.airflow.lake()).catalog, ["postgres", "mariadb"])
    shop = {(r["source"], r["source_table"].rsplit(".", 1)[1]): r for r in rows if r["source_table"].endswith(SHOP)}
    assert set(shop) == {(s, t) for s in ("postgres", "mariadb") for t in SHOP}
    for key, row in shop.items():
        assert row["status"] == "equal" and row["source_rows"] == row["lake_rows"] > 0, (key, row)
    # the source agrees with what was recorded: the rolled-back customer never made it anywhere
    with app_sql(stack, "postgres") as sql:
        assert sql.scalar("SELECT count(*) FROM inventory.customers WHERE name = 'never committed'") == 0
        assert sql.scalar("SELECT count(*) FROM inventory.customers") == shop[("postgres", "customers")]["lake_rows"]
    # no secret of the stack in what the demo printed
    secrets = stack.secrets
    leaked = [name for name in secret_names() if secrets[name] in output]
    assert leaked == []


def test_cdc_ingest_postgres_has_successful_scheduled_runs(demo: dict[str, Any], airflow: Any, stack: Stack) -> None:
    assert demo["rc"] == 0
    # a scheduled run may still be finishing its last tasks when the demo ends: wait for one to succeed
    deadline = time.monotonic() + 300
    while True:
        runs = airflow.dag_runs("cdc_ingest__postgres", run_type="scheduled", state="success")
        ran_spark = [
            r
            for r in runs
            if {t["task_id"]: t["state"] for t in airflow.task_instances("cdc_ingest__postgres", r["dag_run_id"])}.get(
                "ingest"
            )
            == "success"
        ]
        if ran_spark or time.monotonic() > deadline:
            break
        time.sleep(10)
    assert runs, "no successful scheduled run of cdc_ingest__postgres"
    assert ran_spark, "no scheduled run got as far as the Spark job"
    # the batches of those runs are in the ledger, with rows in the lake
    batches = LakeMonitor(stack.airflow.lake()).batches("postgres")
    assert any(b.applied > 0 for b in batches)


def _leaks(secrets: dict[str, str], where: str, text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [f"{name} in {where}" for name, value in secrets.items() if value.encode() in data]


def _connect_config_topic(bootstrap: str) -> list[bytes]:
    """Every record of Kafka Connect's config topic (where it stores connector configurations)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"secret-scan-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        topic = "_cdclake-connect-configs"
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < end and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                values.append((msg.key() or b"") + b"\n" + (msg.value() or b""))
        assert len(values) == end > 0, (len(values), end)
        return values
    finally:
        consumer.close()


def test_no_stack_secret_anywhere_it_should_not_be(demo: dict[str, Any], stack: Stack) -> None:
    """Every secret of the stack, looked for in the connector specs, the DAG files, the demo's output, every task
    log, every XCom value, the Spark jobs' summaries, Connect's stored connector configs and every file and row of
    the lake. The demo must have left something in each of them, so that the scan can fail."""
    secrets = {name: stack.secrets[name] for name in secret_names()}
    root = Path(__file__).resolve().parents[2]
    home = stack.airflow.path
    leaked: list[str] = []
    # files of the project and of the stack's Airflow
    files = {
        "spec": sorted((root / "include" / "connectors").glob("*.yaml")),
        "dag": sorted((root / "dags").glob("*.py")),
        "task log": sorted((home / "logs").rglob("*.log")),
        "job summary": sorted((home / "runs").rglob("*.json")),
    }
    for kind, paths in files.items():
        assert paths, f"no {kind} to scan"
        leaked += [leak for path in paths for leak in _leaks(secrets, f"{kind} {path.name}", path.read_bytes())]
    assert any("task_id=ingest" in str(p) for p in files["task log"])
    leaked += _leaks(secrets, "the demo's output", demo["output"])
    # XCom values in Airflow's metadata database
    with stack.service("postgres").connect("admin", dbname="airflow") as conn:
        xcoms = conn.execute("SELECT dag_id, task_id, key, value::text FROM xcom").fetchall()
    assert any(row[1] == "ingest" for row in xcoms), "no XCom of an ingest task"
    leaked += [leak for row in xcoms for leak in _leaks(secrets, f"XCom {row[0]}.{row[1]}.{row[2]}", row[3] or "")]
    # what Kafka Connect stores: the configs its REST API returns, and its config topic
    client = stack.connect_client()
    names = client.list_connectors()
    assert names
    for name in names:
        leaked += _leaks(secrets, f"connector config {name}", json.dumps(client.get_config(name)))
    leaked += [
        leak
        for value in _connect_config_topic(stack.config.kafka_bootstrap)
        for leak in _leaks(secrets, "Connect's config topic", value)
    ]
    # the lake: every file (catalog, metadata, manifests, data) and every row of every table
    lake = stack.airflow.lake()
    lake_files = [p for p in Path(lake.root).rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in lake_files)
    leaked += [leak for p in lake_files for leak in _leaks(secrets, f"lake file {p.name}", _read_if_there(p))]
    catalog = LakeMonitor(lake).catalog
    tables = _all_tables(catalog)
    assert len(tables) > 8
    for ident in tables:
        rows = catalog.load_table(ident).scan().to_arrow().to_pylist()
        leaked += _leaks(secrets, f"lake table {'.'.join(ident)}", repr(rows))
    assert sorted(set(leaked)) == []


def _read_if_there(path: Path) -> bytes:
    """The file's bytes; none when it went away after it was listed (the scheduled ingest runs meanwhile: the
    catalog's SQLite ``-wal``/``-shm`` files come and go with its connections, expired metadata is deleted)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def test_airflow_answers_and_lists_the_cdc_view(demo: dict[str, Any], airflow: Any, stack: Stack) -> None:
    health = requests.get(f"{stack.config.airflow_url}/api/v2/monitor/health", timeout=10).json()
    assert {k: v["status"] for k, v in health.items()} == {
        "metadatabase": "healthy",
        "scheduler": "healthy",
        "triggerer": "healthy",
        "dag_processor": "healthy",
    }
    plugin = next(p for p in airflow.plugins() if p["name"] == "cdclake")
    assert [a["url_prefix"] for a in plugin["fastapi_apps"]] == ["/cdclake"]
    assert {(v["name"], v["destination"]) for v in plugin["external_views"]} == {("CDC", "nav"), ("CDC source", "dag")}
    # the connections live in the metadata database, their passwords hidden by the API
    conn = airflow.connection("cdc_postgres_reader")
    assert (
        conn is not None
        and conn["login"] == "cdc_reader"
        and conn["password"] != stack.secrets["CDC_POSTGRES_READER_PASSWORD"]
    )
    # only the deployment's sources get ingest DAGs
    assert sorted(d for d in airflow.dag_ids() if d.startswith("cdc_ingest__")) == sorted(INGEST_DAGS)


def test_the_view_refuses_anonymous_requests(stack: Stack, airflow: Any) -> None:
    base = f"{stack.config.airflow_url}/cdclake"
    for path in (
        "/",
        "/api/sources",
        "/sources/postgres",
        "/sources/postgres/dead-letters",
        "/dag/cdc_ingest__postgres",
    ):
        assert requests.get(base + path, timeout=30).status_code == 401, path
    assert requests.get(base + "/api/sources", headers={"Authorization": "Bearer x.y.z"}, timeout=30).status_code == 403
    ok = requests.get(base + "/api/sources", headers={"Authorization": f"Bearer {airflow.token()}"}, timeout=60)
    assert ok.status_code == 200 and {s["source"] for s in ok.json()} == {"postgres", "mariadb"}


def test_the_cdc_view_in_a_browser(demo: dict[str, Any], stack: Stack, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium is not installed: run `make install` (it installs it as root)"
    out = Path(os.environ.get(ARTIFACTS_ENV) or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    url = stack.config.airflow_url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(f"{url}/", wait_until="load")
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", stack.secrets["AIRFLOW_ADMIN_PASSWORD"])
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/", timeout=60_000)
            # the CDC entry of the navigation: both sources, their reconciliation verdicts
            page.goto(f"{url}/plugin/cdc", wait_until="load")
            view = page.frame_locator("iframe")
            view.locator("section.card").first.wait_for(timeout=120_000)
            cards = {c.get_attribute("data-source") for c in view.locator("section.card").all()}
            assert cards == {"postgres", "mariadb"}
            for source in ("postgres", "mariadb"):
                card = view.locator(f"section.card[data-source={source}]")
                assert card.locator("text=RUNNING").count() >= 1
                assert card.locator(".badge.equal").count() >= len(SHOP)
                assert card.locator(".badge.different").count() == 0
            page.screenshot(path=str(out / "cdc-view.png"))
            # a source's page: its batches (with rows applied) and the verdict of every table
            view.locator("section.card[data-source=postgres] h2 a").click()
            view.locator("table.batches tr[data-batch]").first.wait_for(timeout=120_000)
            assert view.locator("table.batches tr[data-batch]").count() >= 1
            verdicts = {
                row.get_attribute("data-table"): row.locator(".badge").inner_text()
                for row in view.locator("table.reconciliation tr[data-table]").all()
            }
            assert {t.rsplit(".", 1)[1] for t, v in verdicts.items() if v == "equal"} >= set(SHOP), verdicts
            assert view.locator("svg.chart rect.bar").count() >= 1
            page.screenshot(path=str(out / "cdc-view-postgres.png"), full_page=True)
            # the CDC source tab of the ingest DAG
            page.goto(f"{url}/dags/cdc_ingest__mariadb/plugin/cdc-source", wait_until="load")
            tab = page.frame_locator("iframe")
            tab.locator("table.batches tr[data-batch]").first.wait_for(timeout=120_000)
            assert "mariadb" in tab.locator("h1").inner_text()
            page.screenshot(path=str(out / "cdc-source-tab.png"))
        finally:
            browser.close()
    for name in ("cdc-view.png", "cdc-view-postgres.png", "cdc-source-tab.png"):
        assert (out / name).stat().st_size > 10_000
    print(f"screenshots in {out}")


def test_two_ingest_runs_of_one_source_started_together_give_one_batch(
    demo: dict[str, Any], stack: Stack, airflow: Any
) -> None:
    """An Airflow run of cdc_ingest__postgres and a `cdclake ingest` of the same source, started together."""
    lake = stack.airflow.lake()
    monitor = LakeMonitor(lake)
    before = {b.batch_id for b in monitor.batches("postgres", last=10_000)}
    tag = f"concurrent-{uuid.uuid4().hex[:8]}"
    with app_sql(stack, "postgres") as sql:
        for i in range(5):
            sql.execute(
                "INSERT INTO inventory.customers (id, name, email, region) VALUES (%s, %s, %s, %s)",
                [950_000 + int(time.time()) % 10_000 * 10 + i, tag, None, "EU"],
            )
    time.sleep(3)  # Debezium streams them into Kafka
    cli: dict[str, Any] = {}

    def run_cli() -> None:
        proc = subprocess.run(
            [CDCLAKE, "ingest", "--spec", "postgres", "--lake", str(lake.root), "--json"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        cli.update(rc=proc.returncode, out=proc.stdout, err=proc.stderr)

    thread = threading.Thread(target=run_cli)
    thread.start()
    run_id = airflow.trigger("cdc_ingest__postgres", note="concurrency test")
    run = airflow.wait_for_run("cdc_ingest__postgres", run_id, timeout_s=900)
    thread.join(timeout=900)
    assert run["state"] == "success"
    assert cli["rc"] == 0, cli.get("err", "")[-3000:]
    new = [b for b in monitor.batches("postgres", last=10_000) if b.batch_id not in before]
    with_rows = [b for b in new if b.records]
    assert len(with_rows) == 1, [(b.batch_id, b.records) for b in new]
    # exactly once: the five rows are in the lake, each once
    from pyiceberg.expressions import EqualTo

    table = monitor.catalog.load_table("pg.inventory.customers")
    ids = table.scan(row_filter=EqualTo("name", tag), selected_fields=("id",)).to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 5
    # the ledger never planned the same offsets twice
    spec = load_spec("postgres")
    committed, pending = monitor.ledger(spec.name)
    assert pending is None and committed is not None
    # the CLI either made the batch or, having waited for Airflow's, found nothing left
    assert json.loads(cli["out"])["status"] in ("committed", "no-new-records")
