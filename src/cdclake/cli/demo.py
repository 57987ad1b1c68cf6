"""``cdclake demo``: the pipeline end to end on the local stack, idempotent.

1. start the local stack (if needed) and check every service answers;
2. apply the demo DDL (``include/sql/{postgres,mariadb}/demo_schema.sql``, idempotent);
3. register the ``postgres`` and ``mariadb`` connectors from their specs (left alone when RUNNING)
   and wait until they run;
4. run a small mixed workload on ``customers`` / ``orders`` in both databases: inserts, updates,
   deletes and a multi-table transaction (rows with ids from :data:`DEMO_ID_BASE`; a rerun first
   deletes the previous run's rows);
5. wait until the data topics hold the workload's events;
6. ingest both sources into the lake (``.lake/`` by default, ``--lake`` to change);
7. reconcile ``customers`` / ``orders`` of both sources with the lake, and print where to look next.

The helpers (:func:`apply_demo_schema`, :func:`ensure_connector`, :func:`run_workload`,
:func:`wait_for_records`, ...) are reused by the integration tests.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from cdclake.cli.stack import _print_status, _progress
from cdclake.connect.client import KafkaConnectClient
from cdclake.connectors import ConnectorKind, ConnectorSpec, DatabaseEndpoint, connect_config, load_spec
from cdclake.exceptions import ConnectorFailedError, StackError
from cdclake.lake import LakeConfig
from cdclake.paths import project_home
from cdclake.stack import Stack, StackConfig

console = Console()

DEMO_SPECS = ("postgres", "mariadb")
DEMO_TABLES = ("customers", "orders")
DEMO_ID_BASE = 900_000
"""The demo workload's rows have ids in [DEMO_ID_BASE, DEMO_ID_BASE + 1000)."""


# --- database helpers (shared with tests) --------------------------------------------------------


class _Sql:
    """A tiny adapter over a psycopg or PyMySQL autocommit connection: execute and transactions."""

    def __init__(self, conn: Any, postgres: bool) -> None:
        self.conn = conn
        self.postgres = postgres

    def execute(self, statement: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; return its row count."""
        if self.postgres:
            return int(self.conn.execute(statement, list(args)).rowcount)
        with self.conn.cursor() as cur:
            return int(cur.execute(statement, list(args)))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One database transaction around the block."""
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.begin()
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()


@contextmanager
def app_sql(stack: Stack, database: str) -> Iterator[_Sql]:
    """An :class:`_Sql` on the ``demo`` database as the stack's ``app`` user (``postgres`` or ``mariadb``)."""
    if database == "postgres":
        with stack.service("postgres").connect("app", dbname="demo") as conn:
            yield _Sql(conn, postgres=True)
    else:
        with stack.service("mariadb").connect("app", database="demo") as conn:
            yield _Sql(conn, postgres=False)


def apply_demo_schema(stack: Stack) -> None:
    """Create the demo tables in both databases (the DDL files are idempotent)."""
    sql_dir = project_home() / "include" / "sql"
    with stack.service("postgres").connect("app", dbname="demo") as conn:
        conn.execute((sql_dir / "postgres" / "demo_schema.sql").read_text())
    text = (sql_dir / "mariadb" / "demo_schema.sql").read_text()
    statements = [
        s
        for s in text.split(";")
        if s.strip() and not all(line.strip().startswith("--") or not line.strip() for line in s.splitlines())
    ]
    with stack.service("mariadb").connect("app", database="demo") as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def run_workload(sql: _Sql, customers: str, orders: str, id_base: int) -> dict[str, int]:
    """A small mixed workload on ``customers`` / ``orders``; returns the Kafka records expected per table.

    Rows with ids in ``[id_base, id_base + 1000)`` are deleted first (so a rerun starts clean), then:
    a transaction inserting customers, one inserting orders, updates, deletes, and a multi-table
    transaction (new customer + order + update of another order). A delete yields two records
    (the delete event and its tombstone).
    """
    c, o = id_base, id_base
    events = {customers: 0, orders: 0}
    with sql.transaction():
        events[orders] += 2 * sql.execute(f"DELETE FROM {orders} WHERE id >= %s AND id < %s", [o, o + 1000])
        events[customers] += 2 * sql.execute(f"DELETE FROM {customers} WHERE id >= %s AND id < %s", [c, c + 1000])
    with sql.transaction():
        for i in range(1, 6):
            sql.execute(
                f"INSERT INTO {customers} (id, name, email, region) VALUES (%s, %s, %s, %s)",
                [c + i, f"demo customer {i}", f"c{i}@example.com", "EU" if i % 2 else "US"],
            )
            events[customers] += 1
    with sql.transaction():
        for i in range(1, 9):
            sql.execute(
                f"INSERT INTO {orders} (id, customer_id, amount, status, ordered_on) VALUES (%s, %s, %s, %s, %s)",
                [o + 100 + i, c + 1 + i % 5, Decimal(i * 1250) / 100, "new", dt.date(2024, 3, i)],
            )
            events[orders] += 1
    events[customers] += sql.execute(f"UPDATE {customers} SET email = %s WHERE id = %s", ["changed@example.com", c + 2])
    events[orders] += sql.execute(
        f"UPDATE {orders} SET status = %s, amount = %s WHERE id = %s", ["paid", Decimal("99.90"), o + 103]
    )
    events[orders] += 2 * sql.execute(f"DELETE FROM {orders} WHERE id = %s", [o + 108])
    events[customers] += 2 * sql.execute(f"DELETE FROM {customers} WHERE id = %s", [c + 5])
    with sql.transaction():  # one transaction across both tables
        sql.execute(
            f"INSERT INTO {customers} (id, name, email, region) VALUES (%s, %s, %s, %s)",
            [c + 6, "demo customer 6", None, None],
        )
        sql.execute(
            f"INSERT INTO {orders} (id, customer_id, amount, status, ordered_on) VALUES (%s, %s, %s, %s, %s)",
            [o + 109, c + 6, Decimal("0.05"), "new", dt.date(2024, 4, 1)],
        )
        sql.execute(f"UPDATE {orders} SET amount = amount + 1 WHERE id = %s", [o + 101])
        events[customers] += 1
        events[orders] += 2
    return events


# --- Kafka / Connect helpers (shared with tests) --------------------------------------------------


def topic_end_offsets(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Sum of the partitions' end offsets of each topic (0 for a topic that does not exist yet)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdclake-demo", "log_level": 0})
    try:
        metadata = consumer.list_topics(timeout=10)
        out: dict[str, int] = {}
        for topic in topics:
            parts = metadata.topics[topic].partitions if topic in metadata.topics else {}
            out[topic] = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
        return out
    finally:
        consumer.close()


def wait_for_records(bootstrap: str, at_least: Mapping[str, int], timeout_s: float = 120.0) -> dict[str, int]:
    """Wait until each topic's end offsets add up to at least the given count.

    Raises:
        TimeoutError: naming the topics that did not get there.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        ends = topic_end_offsets(bootstrap, list(at_least))
        short = {t: (ends[t], n) for t, n in at_least.items() if ends[t] < n}
        if not short:
            return ends
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics did not receive the expected records in {timeout_s:.0f}s: {short} (have, want)")
        time.sleep(1.0)


def delete_connector_topics(bootstrap: str, prefix: str) -> list[str]:
    """Delete a connector's topics: ``<prefix>``, ``<prefix>.*``, ``<prefix>-signal``, its heartbeat topic.

    Returns:
        The topics deleted (waits for each deletion).
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    extra = (f"{prefix}-signal", f"__debezium-heartbeat.{prefix}")
    topics = [
        t for t in admin.list_topics(timeout=10).topics if t == prefix or t.startswith(prefix + ".") or t in extra
    ]
    if topics:
        for future in admin.delete_topics(topics).values():
            future.result(timeout=30)
    return topics


def wait_running(client: KafkaConnectClient, name: str, timeout_s: float = 120.0) -> None:
    """Wait until the connector and its tasks are RUNNING.

    Raises:
        ConnectorFailedError: when the connector or a task fails.
        TimeoutError: when it does not run in time.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.exists(name):
            status = client.status(name)
            if status.is_running:
                return
            if status.is_failed:
                raise ConnectorFailedError(f"connector {name} failed:\n{status.failure_summary()}")
        time.sleep(1.0)
    raise TimeoutError(f"connector {name} is not RUNNING after {timeout_s:.0f}s")


def endpoint_for(stack: Stack, spec: ConnectorSpec) -> DatabaseEndpoint:
    """The stack database a spec captures, as the Connect worker (on the same host) sees it."""
    c = stack.config
    port = c.postgres_port if spec.connector is ConnectorKind.POSTGRESQL else c.mariadb_port
    return DatabaseEndpoint(c.host, port)


def ensure_connector(client: KafkaConnectClient, spec: ConnectorSpec, endpoint: DatabaseEndpoint) -> str:
    """Register the spec's connector unless it already runs; resume or restart it when paused or failed.

    Returns:
        What was done: ``running``, ``resumed``, ``restarted`` or ``registered``.

    Raises:
        ConnectorConfigInvalidError: when Connect's validation rejects the config.
    """
    name = spec.name
    if client.exists(name):
        status = client.status(name)
        if status.is_running:
            return "running"
        state = status.connector.state.value
        if state in ("PAUSED", "STOPPED"):
            client.resume(name)
            return "resumed"
        if status.is_failed:
            client.restart(name, include_tasks=True, only_failed=True)
            return "restarted"
    config = connect_config(spec, endpoint)
    client.validate_or_raise(config["connector.class"], {**config, "name": name}, connector=name)
    client.create_or_update(name, config)
    return "registered"


def data_topics(spec: ConnectorSpec, tables: Sequence[str]) -> dict[str, str]:
    """Spec table name (``inventory.customers``) → its Debezium data topic, for the spec tables ending in ``tables``."""
    return {t.name: f"{spec.topic_prefix}.{t.name}" for t in spec.tables if t.name.rpartition(".")[2] in tables}


# --- the command ----------------------------------------------------------------------------------


@dataclass
class _Steps:
    started: float

    def step(self, text: str) -> Callable[[str], None]:
        console.print(f"[bold cyan]▸[/] {text}", highlight=False)
        t0 = time.monotonic()

        def done(result: str) -> None:
            console.print(f"  [green]✓[/] {result} [dim]({time.monotonic() - t0:.1f}s)[/]", highlight=False)

        return done


def demo(
    lake: Optional[Path] = typer.Option(None, "--lake", help="Embedded lake directory [env CDC_LAKE_DIR; .lake/]"),  # noqa: UP045
) -> None:
    """Run the pipeline end to end: stack, connectors, a workload, ingest into Iceberg, reconcile."""
    steps = _Steps(time.monotonic())
    stack = Stack(StackConfig.from_env())
    done = steps.step("local stack")
    with console.status("starting the local stack…"):
        stack.up(progress=_progress)
    if not all(row.ready for row in stack.status()):
        _print_status(stack)
        raise StackError("some services do not answer; see `cdclake stack status` and `cdclake stack logs SERVICE`")
    done("up and healthy")

    done = steps.step("demo tables (include/sql/*/demo_schema.sql)")
    apply_demo_schema(stack)
    done("customers, orders, all_types present in PostgreSQL inventory.* and MariaDB demo.*")

    specs = {name: load_spec(name) for name in DEMO_SPECS}
    client = KafkaConnectClient(stack.config.connect_url)
    done = steps.step("connectors")
    actions = {}
    for name, spec in specs.items():
        actions[name] = ensure_connector(client, spec, endpoint_for(stack, spec))
    with console.status("waiting for the connectors to run…"):
        for name in specs:
            wait_running(client, name)
    done(", ".join(f"{n}: {a}" for n, a in actions.items()) + " — all RUNNING")

    done = steps.step("workload: inserts, updates, deletes, a multi-table transaction")
    bootstrap = stack.config.kafka_bootstrap
    want: dict[str, int] = {}
    counts: dict[str, dict[str, int]] = {}
    for name, spec in specs.items():
        topics = data_topics(spec, DEMO_TABLES)
        before = topic_end_offsets(bootstrap, list(topics.values()))
        customers, orders = (next(t for t in topics if t.endswith("." + x)) for x in DEMO_TABLES)
        with app_sql(stack, name) as sql:
            events = run_workload(sql, customers, orders, DEMO_ID_BASE)
        counts[name] = events
        want.update({topics[t]: before[topics[t]] + n for t, n in events.items()})
    done("; ".join(f"{n}: " + ", ".join(f"{t} {k} events" for t, k in ev.items()) for n, ev in counts.items()))

    done = steps.step("waiting for the events in Kafka")
    with console.status("waiting for Debezium…"):
        wait_for_records(bootstrap, want)
    done(", ".join(want))

    lake_config = LakeConfig.from_env(lake)
    done = steps.step(f"ingest into the lake ({lake_config.root or lake_config.uri})")
    from cdclake.cli.ingest import _report
    from cdclake.ingest.runner import ingest_from_kafka
    from cdclake.spark import build_spark_session

    with console.status("starting Spark…"):
        spark = build_spark_session("cdclake-demo", lake=lake_config)
        spark.sparkContext.setLogLevel("ERROR")
    for name in specs:
        with console.status(f"ingesting {name}…"):
            summary = ingest_from_kafka(spark, name)
        _report(summary.as_dict(), as_json=False)
    done("both sources ingested")
    from cdclake.cli.lake import tables as list_lake_tables

    list_lake_tables(lake)

    done = steps.step("reconcile customers / orders with the sources")
    from cdclake.cli.reconcile import print_report
    from cdclake.reconcile import reconcile_source

    equal = True
    for spec in specs.values():
        report = reconcile_source(spec, lake=lake_config, tables=list(DEMO_TABLES))
        print_report(report, show=5)
        equal = equal and report.equal
    done("the lake matches both sources" if equal else "[red]differences found (see above)[/]")

    lake_opt = f" --lake {lake}" if lake else ""
    console.print(
        f"\n[bold]done in {time.monotonic() - steps.started:.0f}s.[/] Where to look next:\n"
        f"  cdclake lake tables{lake_opt}                         every Iceberg table, rows, last batch\n"
        f"  cdclake lake show lake.pg.inventory.orders{lake_opt}  schema, snapshot summary, rows\n"
        f"  cdclake reconcile postgres{lake_opt}                  compare again (docs/reconcile.md)\n"
        f"  cdclake ingest --spec mariadb{lake_opt}               ingest what changed since\n"
        "  docs/ingestion.md, docs/reconcile.md; `cdclake stack down` stops the stack.",
        highlight=False,
    )
    raise typer.Exit(0 if equal else 1)
