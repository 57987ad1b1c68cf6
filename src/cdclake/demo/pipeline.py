"""The demo pipeline, end to end, driven through the stack's Airflow (what ``cdclake demo`` runs).

1. the local stack with Airflow (``cdclake stack up``);
2. the shop schema in PostgreSQL and MariaDB (``include/sql/*/demo_schema.sql``);
3. the connectors, registered by the ``cdc_connectors`` DAG, triggered through Airflow's REST API;
4. scheduled ingestion: ``cdc_ingest__postgres`` and ``cdc_ingest__mariadb`` unpaused (every ``CDC_INGEST_INTERVAL``
   of the stack's Airflow), with ``cdc_connectors_health``;
5. the shop workload on both databases (:class:`~cdclake.demo.workload.ShopWorkload`), its steps spread over
   the run's duration while the scheduled ingest runs apply them; an incremental ``cdc_snapshot`` of the
   products of each source is triggered with Params once the workload has added their column (``verify`` off:
   the scheduled runs ingest what it reads, and the reconciliation at the end checks every table);
6. waiting until each source has caught up: the lake shows the workload's last change and no record is left
   in Kafka;
7. reconciliation through the ``cdc_reconcile`` DAG, whose verdicts per table are read back from the lake.

Each step reports its progress; :func:`run_demo` returns a :class:`DemoReport`. The stack and Airflow keep
running afterwards.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cdclake.connectors import ConnectorSpec, load_spec
from cdclake.demo.database import app_sql, apply_demo_schema
from cdclake.demo.workload import DEMO_ID_BASE, ShopWorkload, StepResult
from cdclake.exceptions import CdcError, StackError
from cdclake.lake.names import catalog_identifier, spec_table_identifier
from cdclake.monitor import percentile
from cdclake.stack import Stack

logger = logging.getLogger(__name__)

SOURCES = ("postgres", "mariadb")
SHOP_TABLES = ("customers", "products", "orders", "order_items")
INGEST_DAGS = tuple(f"cdc_ingest__{s}" for s in SOURCES)
#: DAGs the demo turns on: the manual ones it triggers, the scheduled ones that do the work.
DEMO_DAGS = ("cdc_connectors", "cdc_snapshot", "cdc_reconcile", "cdc_connectors_health", *INGEST_DAGS)


class DemoError(CdcError, RuntimeError):
    """A step of the demo failed; the message says which and where to look."""


class Reporter:
    """How the demo shows its progress (the CLI prints it; the default logs it)."""

    def start(self, title: str) -> None:
        """A step begins."""
        logger.info("demo: %s", title)

    def status(self, text: str) -> None:
        """Progress within the current step."""
        logger.info("demo:   %s", text)

    def done(self, text: str, seconds: float) -> None:
        """The current step did ``text`` in ``seconds``."""
        logger.info("demo:   done: %s (%.1fs)", text, seconds)


@dataclass
class TableVerdict:
    """One table's reconciliation: source rows, lake rows, the verdict, sample keys when they differ."""

    source: str
    table: str
    source_rows: int
    lake_rows: int
    status: str
    sample_keys: str | None = None
    note: str | None = None


@dataclass
class DemoReport:
    """What the demo did and found."""

    started_at: datetime
    airflow_url: str
    secrets_file: str
    lake: str
    verdicts: list[TableVerdict] = field(default_factory=list)
    reconcile_state: str | None = None
    batches: dict[str, int] = field(default_factory=dict)
    scheduled_runs: dict[str, int] = field(default_factory=dict)
    snapshot_runs: dict[str, str] = field(default_factory=dict)
    freshness_s: list[float] = field(default_factory=list)
    steps_s: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def equal(self) -> bool:
        """Every table compared equal (and the reconciliation ran)."""
        return bool(self.verdicts) and all(v.status != "different" for v in self.verdicts)

    @property
    def different(self) -> list[TableVerdict]:
        return [v for v in self.verdicts if v.status == "different"]

    @property
    def freshness_p50(self) -> float | None:
        """Median seconds from a row's source commit to its visibility in the lake (None: no row measured)."""
        return percentile(self.freshness_s, 0.5)

    @property
    def freshness_max(self) -> float | None:
        """The longest a measured row took from its source commit to its visibility in the lake."""
        return max(self.freshness_s, default=None)


def run_demo(
    stack: Stack,
    *,
    rows: int = 40,
    duration_s: float = 60.0,
    timeout_s: float = 900.0,
    reporter: Reporter | None = None,
) -> DemoReport:
    """Run the demo (see the module docstring) and return what it found.

    Args:
        stack: the local stack (started when it is not running).
        rows: customers and orders the workload creates per database.
        duration_s: how long the workload's steps are spread over.
        timeout_s: how long to wait for each DAG run and for the lake to catch up.
        reporter: progress output.

    Raises:
        DemoError: when a step fails (a DAG run failed, the lake did not catch up in time).
        StackError: when the stack does not come up.
    """
    return _Demo(stack, rows, duration_s, timeout_s, reporter or Reporter()).run()


class _Demo:
    def __init__(self, stack: Stack, rows: int, duration_s: float, timeout_s: float, reporter: Reporter) -> None:
        self.stack, self.rows, self.duration_s, self.timeout_s, self.out = stack, rows, duration_s, timeout_s, reporter
        self.token = secrets.token_hex(3)
        self.specs: dict[str, ConnectorSpec] = {name: load_spec(name) for name in SOURCES}
        self.t0 = time.monotonic()
        self.started = datetime.now(UTC)

    def run(self) -> DemoReport:
        self._step("local stack with Airflow", self._stack_up)
        self.client = self.stack.airflow.client()
        self.lake = self.stack.airflow.lake()
        self.report = DemoReport(
            started_at=self.started,
            airflow_url=self.stack.config.airflow_url,
            secrets_file=str(self.stack.config.secrets_file),
            lake=str(self.lake.root or self.lake.uri),
        )
        self._step("shop schema in PostgreSQL and MariaDB", self._schema)
        self._step("Airflow DAGs turned on", self._dags_on)
        self._step("connectors registered by the cdc_connectors DAG", self._connectors)
        self._step("scheduled ingestion on", self._ingestion_on)
        self._step(f"workload on both databases over {self.duration_s:.0f}s, while the ingest DAGs run", self._workload)
        self._step("waiting until the lake has caught up with both sources", self._caught_up)
        self._step("cdc_snapshot runs", self._snapshots)
        self._step("reconciliation by the cdc_reconcile DAG", self._reconcile)
        self._step("batches and freshness", self._figures)
        self.report.seconds = time.monotonic() - self.t0
        return self.report

    def _step(self, title: str, body: Callable[[], str]) -> None:
        self.out.start(title)
        t0 = time.monotonic()
        result = body()
        elapsed = time.monotonic() - t0
        if hasattr(self, "report"):
            self.report.steps_s[title] = elapsed
        self.out.done(result, elapsed)

    # -- steps -----------------------------------------------------------------------------------

    def _stack_up(self) -> str:
        self.stack.up(progress=lambda service, message: self.out.status(f"{service}: {message}"))
        down = [f"{row.name} ({row.probe or 'stopped'})" for row in self.stack.status() if not row.ready]
        if down:
            raise StackError(f"{', '.join(down)} do not answer; see `cdclake stack status` and `cdclake stack logs`")
        return f"every service answers; Airflow at {self.stack.config.airflow_url}"

    def _schema(self) -> str:
        apply_demo_schema(self.stack)
        return "customers, products, orders, order_items (and all_types) in inventory.* and demo.*"

    def _dags_on(self) -> str:
        for dag_id in DEMO_DAGS:
            self.client.wait_for_dag(dag_id, timeout_s=self.timeout_s)
        for dag_id in ("cdc_connectors", "cdc_snapshot", "cdc_reconcile"):
            self.client.set_paused(dag_id, False)
        return "cdc_connectors, cdc_snapshot, cdc_reconcile (manual) unpaused"

    def _connectors(self) -> str:
        run = self._dag_run("cdc_connectors", {})
        if run["state"] != "success":
            raise DemoError(self._failed("cdc_connectors", run["dag_run_id"]))
        return "postgres and mariadb RUNNING (cdc_connectors: validate, upsert, restart failed, wait RUNNING)"

    def _ingestion_on(self) -> str:
        for dag_id in (*INGEST_DAGS, "cdc_connectors_health"):
            self.client.set_paused(dag_id, False)
        interval = self.stack.airflow.started_environment().get("CDC_INGEST_INTERVAL", "5m")
        return f"{', '.join(INGEST_DAGS)} every {interval} (CDC_INGEST_INTERVAL), cdc_connectors_health every 10m"

    def _workload(self) -> str:
        self.snapshots: dict[str, str] = {}
        with app_sql(self.stack, "postgres") as pg, app_sql(self.stack, "mariadb") as maria:
            workloads = {
                "postgres": ShopWorkload(pg, self.rows, self.token),
                "mariadb": ShopWorkload(maria, self.rows, self.token),
            }
            self.workloads = workloads
            steps = {name: w.steps() for name, w in workloads.items()}
            n = len(steps["postgres"])
            # a column added while Debezium's incremental snapshot reads a table's chunks can fail its chunk read
            # (DBZ-4350; seen on MariaDB as "Column 'launch_note' not found in result set"), and no ABORTED
            # notification follows: the snapshot starts once the workload's schema change is done
            snapshot_after = [body.__name__ for _, body in steps["postgres"]].index(ShopWorkload.add_column.__name__)
            pause = self.duration_s / n
            commits = 0
            for i in range(n):
                t0 = time.monotonic()
                for source, source_steps in steps.items():
                    title, body = source_steps[i]
                    result: StepResult = body()
                    commits += result.transactions
                    self.out.status(f"{source}: {title}" + (f" ({result.note})" if result.note else ""))
                if i == snapshot_after:  # products are in, their column added: snapshot them again, incrementally
                    for source in SOURCES:
                        conf = {"source": source, "tables": ["products"], "type": "incremental", "verify": False}
                        self.snapshots[source] = self.client.trigger("cdc_snapshot", conf, note="cdclake demo")
                        self.out.status(f"cdc_snapshot triggered for {source}: {conf}")
                time.sleep(max(0.0, pause - (time.monotonic() - t0)))
        return f"{n} steps, {commits} transactions committed per database pair"

    def _caught_up(self) -> str:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.expressions import EqualTo

        from cdclake.monitor import LakeMonitor, pending_work

        catalog = load_catalog(**self.lake.pyiceberg_properties())
        monitor = LakeMonitor(self.lake, catalog)
        deadline = time.monotonic() + self.timeout_s
        waiting: dict[str, str] = dict.fromkeys(SOURCES, "")
        while waiting:
            for source in list(waiting):
                spec = self.specs[source]
                workload = self.workloads[source]
                ident = catalog_identifier(spec_table_identifier(spec, workload.customers))
                marker = None
                if catalog.table_exists(ident):
                    found = catalog.load_table(ident).scan(
                        row_filter=EqualTo("id", DEMO_ID_BASE), selected_fields=("name",)
                    )
                    names = found.to_arrow().column("name").to_pylist()
                    marker = names[0] if names else None
                work = pending_work(spec, monitor)
                state = f"marker {'in the lake' if marker == workload.marker_name else 'not yet in the lake'}, {work.describe()}"
                if marker == workload.marker_name and not work:
                    del waiting[source]
                    self.out.status(f"{source}: caught up")
                elif state != waiting[source]:
                    waiting[source] = state
                    self.out.status(f"{source}: {state}")
            if waiting and time.monotonic() > deadline:
                raise DemoError(
                    f"the lake did not catch up in {self.timeout_s:.0f}s: "
                    + "; ".join(f"{s}: {w}" for s, w in waiting.items())
                    + "; see the ingest DAGs' runs in the Airflow UI"
                )
            if waiting:
                time.sleep(3.0)
        return "both sources: the workload's last change is in the lake, nothing left in Kafka"

    def _snapshots(self) -> str:
        states = []
        for source, run_id in self.snapshots.items():
            run = self._dag_run("cdc_snapshot", None, run_id=run_id)
            self.report.snapshot_runs[source] = run["state"]
            states.append(f"{source}: {run['state']}")
            if run["state"] != "success":
                self.out.status(self._failed("cdc_snapshot", run_id))
        return ", ".join(states)

    def _reconcile(self) -> str:
        from pyiceberg.catalog import load_catalog

        from cdclake.reconcile.audit import latest_results

        run = self._dag_run("cdc_reconcile", {"sources": list(SOURCES), "tables": []})
        self.report.reconcile_state = run["state"]
        label = f"airflow cdc_reconcile/{run['dag_run_id']}"
        rows = [
            r for r in latest_results(load_catalog(**self.lake.pyiceberg_properties()), SOURCES) if r["run"] == label
        ]
        if not rows:
            raise DemoError(self._failed("cdc_reconcile", run["dag_run_id"]) + "; it recorded no verdict")
        self.report.verdicts = [
            TableVerdict(r["source"], r["source_table"], r["source_rows"], r["lake_rows"], r["status"],
                         r["sample_keys"], r["note"])
            for r in rows
        ]  # fmt: skip
        different = [v.table for v in self.report.verdicts if v.status == "different"]
        return f"{len(rows)} tables compared, " + (f"different: {', '.join(different)}" if different else "all equal")

    def _figures(self) -> str:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.expressions import GreaterThanOrEqual

        from cdclake.monitor import LakeMonitor, row_freshness

        catalog = load_catalog(**self.lake.pyiceberg_properties())
        monitor = LakeMonitor(self.lake, catalog)
        for source in SOURCES:
            batches = [b for b in monitor.batches(source, last=10_000) if b.committed_at >= self.started]
            self.report.batches[source] = len(batches)
            runs = self.client.dag_runs(f"cdc_ingest__{source}", run_type="scheduled", state="success", limit=1000)
            self.report.scheduled_runs[source] = sum(1 for r in runs if _after(r.get("run_after"), self.started))
            spec = self.specs[source]
            for table in SHOP_TABLES:
                name = next(t for t in spec.table_names if t.endswith("." + table))
                ident = catalog_identifier(spec_table_identifier(spec, name))
                if not catalog.table_exists(ident):
                    continue
                column = "order_id" if table == "order_items" else "id"
                self.report.freshness_s += row_freshness(
                    catalog.load_table(ident), GreaterThanOrEqual(column, DEMO_ID_BASE), since=self.started
                )
        return f"{sum(self.report.batches.values())} batches committed, {len(self.report.freshness_s)} rows measured"

    # -- Airflow ---------------------------------------------------------------------------------

    def _dag_run(self, dag_id: str, conf: dict[str, Any] | None, run_id: str | None = None) -> dict[str, Any]:
        run_id = run_id or self.client.trigger(dag_id, conf, note="cdclake demo")
        self.out.status(f"{dag_id} run {run_id}")

        def show(run: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
            states: dict[str, list[str]] = {}
            for t in tasks:
                states.setdefault(t["task_id"], []).append(t.get("state") or "none")
            self.out.status(
                f"{dag_id}: {run['state']}; "
                + ", ".join(f"{task} {'/'.join(sorted(set(s)))}" for task, s in sorted(states.items()))
            )

        return self.client.wait_for_run(dag_id, run_id, self.timeout_s, show)

    def _failed(self, dag_id: str, run_id: str) -> str:
        failed = [t["task_id"] for t in self.client.task_instances(dag_id, run_id) if t.get("state") == "failed"]
        return (
            f"DAG run {dag_id}/{run_id} did not succeed (failed tasks: {', '.join(failed) or 'none'}); its task logs "
            f"are in the Airflow UI ({self.stack.config.airflow_url}/dags/{dag_id})"
        )


def _after(iso: str | None, when: datetime) -> bool:
    return bool(iso) and datetime.fromisoformat(str(iso).replace("Z", "+00:00")) >= when
