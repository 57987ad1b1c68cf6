"""The Apache Iceberg Kafka Connect sink on a Debezium topic (a peer of ``cdclake ingest --mode append`` in
benchmarks/bench_real_shape.py ``--peers``).

The sink (``org.apache.iceberg:iceberg-kafka-connect``, the version the project pins for Iceberg) and its runtime
dependencies are laid out by ``make peer-jars`` (jvm/peers/pom.xml) in ``.cache/jvm/peer-plugins``. It runs on a
Kafka Connect worker of its own, started here in standalone mode from the local stack's Kafka distribution, so
that its figure is not shared with the stack's worker and the stack's worker is left as it is. The connector is
configured as its documentation shows for Debezium topics: the sink's ``DebeziumTransform`` (the row image, with
a ``_cdc`` struct of op, offset and source), Kafka's ``Filter`` with ``RecordIsTombstone`` in front of it, the
table auto-created, a JDBC catalog in SQLite (the embedded lake's kind) and a commit every second.

The sink appends: its table ends with one row per change event, not the source table's rows. Its time is from
the worker's start (JVM included) until the table holds every change event of the topic.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONNECTOR_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"


def plugin_dir(jvm_dir: Path) -> Path:
    """The sink's plugin directory, built by ``make peer-jars`` when missing."""
    plugins = jvm_dir / "peer-plugins"
    if not (plugins / "iceberg-kafka-connect").is_dir():
        subprocess.run(["make", "-C", str(ROOT), "peer-jars", f"JVM_DIR={jvm_dir.resolve()}"], check=True)
    return plugins


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _properties(values: dict[str, Any]) -> str:
    return "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in values.items())


def worker_properties(bootstrap: str, plugins: Path, work: Path, schemas: bool) -> dict[str, Any]:
    """A standalone worker's settings: the stack's broker, JsonConverter as the connector's topics were written."""
    return {
        "bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": schemas,
        "value.converter.schemas.enable": schemas,
        "offset.storage.file.filename": work / "offsets",
        "offset.flush.interval.ms": 1000,
        "plugin.path": plugins,
        "listeners": f"http://127.0.0.1:{_free_port()}",
    }


def connector_properties(name: str, topic: str, table: str, lake: Path, control_topic: str) -> dict[str, Any]:
    """The sink's settings for one Debezium topic into ``table`` of the embedded-kind catalog in ``lake``."""
    return {
        "name": name,
        "connector.class": CONNECTOR_CLASS,
        "tasks.max": 1,
        "topics": topic,
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": True,
        "iceberg.catalog.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "iceberg.catalog.uri": f"jdbc:sqlite:{lake / 'catalog.db'}",
        "iceberg.catalog.jdbc.schema-version": "V1",
        "iceberg.catalog.warehouse": (lake / "warehouse").as_uri(),
        "iceberg.control.topic": control_topic,
        "iceberg.control.commit.interval-ms": 1000,
        "predicates": "tombstone",
        "predicates.tombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "transforms": "dropTombstones,debezium",
        "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropTombstones.predicate": "tombstone",
        "transforms.debezium.type": "org.apache.iceberg.connect.transforms.DebeziumTransform",
    }


def _raise_on_failed_task(rest: str, name: str) -> None:
    """Stop the run when the sink's task failed (the worker keeps running without it)."""
    import requests

    try:
        tasks = requests.get(f"{rest}/connectors/{name}/status", timeout=5).json().get("tasks", [])
    except (requests.RequestException, ValueError):
        return  # the worker's REST API is not up yet
    for task in tasks:
        if task.get("state") == "FAILED":
            raise SystemExit(f"the Iceberg sink's task {task.get('id')} failed:\n{task.get('trace', '')[:3000]}")


def table_rows(lake: Path, table: str) -> int:
    """Rows of ``table`` in its current snapshot (0 before the sink created it)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog(  # the sink names its catalog "iceberg"
        "iceberg", type="sql", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=(lake / "warehouse").as_uri()
    )
    try:
        snapshot = catalog.load_table(table).current_snapshot()
    except NoSuchTableError:
        return 0
    return int(snapshot.summary["total-records"]) if snapshot else 0


def run(
    *, bootstrap: str, jvm_dir: Path, topic: str, events: int, schemas: bool, work: Path, timeout_s: float = 3600
) -> dict[str, Any]:
    """Run the sink over ``topic`` until its table holds ``events`` rows; its wall clock and row count."""
    from confluent_kafka.admin import AdminClient, NewTopic

    plugins = plugin_dir(jvm_dir)
    work.mkdir(parents=True, exist_ok=True)
    lake = work / "lake"
    (lake / "warehouse").mkdir(parents=True, exist_ok=True)
    name = f"iceberg-sink-{topic.split('.', 1)[0]}"
    control = f"{name}-control"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(control, 1, 1)]).values():
        future.result(30)
    table = "sink.items"
    worker = worker_properties(bootstrap, plugins, work, schemas)
    rest = str(worker["listeners"])
    (work / "worker.properties").write_text(_properties(worker))
    (work / "sink.properties").write_text(_properties(connector_properties(name, topic, table, lake, control)))
    (work / "log4j2.properties").write_text(
        "rootLogger.level = WARN\nlogger.iceberg.name = org.apache.iceberg\nlogger.iceberg.level = INFO\nrootLogger.appenderRef.stdout.ref = STDOUT\nappender.console.type = Console\n"
        "appender.console.name = STDOUT\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = [%d] %p %m (%c)%n\n"
    )
    java = shutil.which("java") or "java"
    cmd = [
        java, "-Xms1g", "-Xmx1g", f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
        "-cp", str(jvm_dir / "kafka" / "*"), "org.apache.kafka.connect.cli.ConnectStandalone",
        str(work / "worker.properties"), str(work / "sink.properties"),
    ]  # fmt: skip
    log = (work / "worker.log").open("w")
    t0 = time.monotonic()
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    rows = 0
    try:
        while rows < events:
            if process.poll() is not None:
                raise SystemExit(f"the Iceberg sink's worker exited ({process.returncode}); see {work / 'worker.log'}")
            if time.monotonic() - t0 > timeout_s:
                raise SystemExit(f"the Iceberg sink wrote {rows:,} of {events:,} rows in {timeout_s:.0f} s")
            time.sleep(0.5)
            rows = table_rows(lake, table)
            _raise_on_failed_task(rest, name)
        wall = time.monotonic() - t0
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    return {"wall_s": wall, "rows": rows, "lake": lake, "table": table}
