"""What the CDC view shows of each source, gathered from Kafka Connect, Kafka and the lake's audit tables.

Each part is read on its own, with short timeouts: a system that does not answer shows as an error in its part
of the page, and the rest of the page still renders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cdclake.connect import ConnectorStatus, KafkaConnectClient
from cdclake.connectors import ConnectorSpec, load_specs
from cdclake.monitor import Batch, LakeMonitor, PartitionLag, kafka_lag
from cdclake.orchestration.deployment import enabled_specs
from cdclake.settings import settings

log = logging.getLogger(__name__)

KAFKA_CONNECT_CONN_ID = "kafka_connect_default"
KAFKA_CONN_ID = "kafka_default"
INGEST_DAG_PREFIX = "cdc_ingest__"
#: The DAGs whose "CDC source" tab shows their source: the scheduled and the continuous ingest DAGs.
SOURCE_DAG_PREFIXES = (INGEST_DAG_PREFIX, "cdc_follow__")
#: Batches shown per source (table and chart).
BATCHES_SHOWN = 30

T = TypeVar("T")


@dataclass
class Part:
    """One part of a page: its value, or why it could not be read."""

    value: Any = None
    error: str | None = None


def _read(what: str, read: Callable[[], T]) -> Part:
    try:
        return Part(read())
    except Exception as exc:  # noqa: BLE001 - every failure is shown in its part of the page
        log.warning("CDC view: cannot read %s: %s", what, exc)
        return Part(error=f"{type(exc).__name__}: {exc}"[:500])


@dataclass
class SourceView:
    """Everything the view shows of one source."""

    spec: ConnectorSpec
    connector: Part = field(default_factory=Part)
    lag: Part = field(default_factory=Part)
    batches: Part = field(default_factory=Part)
    held_transactions: Part = field(default_factory=Part)
    schema_changes: Part = field(default_factory=Part)
    quarantine: Part = field(default_factory=Part)
    dead_letters: Part = field(default_factory=Part)
    reconciliation: Part = field(default_factory=Part)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dag_id(self) -> str:
        return INGEST_DAG_PREFIX + self.spec.name

    @property
    def last_batch(self) -> Batch | None:
        return self.batches.value[0] if self.batches.value else None

    @property
    def lag_records(self) -> int | None:
        return sum(p.lag for p in self.lag.value) if self.lag.value is not None else None

    @property
    def dead_lettered(self) -> int:
        return sum(n for _, _, n in self.dead_letters.value or [])

    @property
    def health(self) -> str:
        """``ok``, ``warning`` or ``failed``: the worst of the connector, the batches and the reconciliation."""
        status: ConnectorStatus | None = self.connector.value
        if self.connector.error or (status is not None and status.is_failed):
            return "failed"
        if any(r["status"] == "different" for r in self.reconciliation.value or []):
            return "failed"
        last = self.last_batch
        if (last is not None and last.problems) or self.quarantine.value:
            return "warning"
        if status is None or not status.is_running:
            return "warning"
        return "ok"

    def to_json(self) -> dict[str, Any]:
        """The JSON form of ``/cdclake/api/sources/<name>``."""
        status: ConnectorStatus | None = self.connector.value
        return {
            "source": self.name,
            "health": self.health,
            "connector": {
                "name": self.spec.connect_name,
                "state": status.connector.state.value if status else None,
                "tasks": [{"id": t.id, "state": t.state.value} for t in status.tasks] if status else [],
                "error": self.connector.error,
            },
            "lag": {
                "records": self.lag_records,
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "end": p.end, "committed": p.committed, "lag": p.lag}
                    for p in self.lag.value or []
                ],
                "error": self.lag.error,
            },
            "batches": [_batch_json(b) for b in self.batches.value or []],
            "held_transactions": sorted({r["tx_id"] for r in self.held_transactions.value or []}),
            "schema_changes": len(self.schema_changes.value or []),
            "quarantined": [s.table for s in self.quarantine.value or []],
            "dead_lettered": self.dead_lettered,
            "reconciliation": [
                {
                    "table": r["source_table"],
                    "status": r["status"],
                    "source_rows": r["source_rows"],
                    "lake_rows": r["lake_rows"],
                    "checked_at": r["checked_at"].isoformat(),
                }
                for r in self.reconciliation.value or []
            ],
            "errors": {
                name: part.error
                for name, part in vars(self).items()
                if isinstance(part, Part) and part.error is not None
            },
        }


def _batch_json(b: Batch) -> dict[str, Any]:
    return {
        "batch_id": b.batch_id,
        "committed_at": b.committed_at.isoformat(),
        "records": b.records,
        "applied": b.applied,
        "skipped": b.skipped,
        "dead_lettered": b.dead_lettered,
        "dead_letters": b.dead_letters,
        "duration_s": round(b.duration_s, 3),
        "latency_s": None if b.latency_s is None else round(b.latency_s, 3),
        "latency_newest_s": None if b.latency_newest_s is None else round(b.latency_newest_s, 3),
        "transactions": b.transactions,
        "tables": {
            t: {k: r.get(k) for k in ("applied", "skipped", "dead_lettered", "quarantined")}
            for t, r in b.tables.items()
        },
        "phases_s": {k: round(v, 3) for k, v in b.phases.items()},
        "problems": b.problems,
    }


def dag_source(dag_id: str) -> str | None:
    """The source an ingest DAG (``cdc_ingest__<source>``, ``cdc_follow__<source>``) ingests; None for other DAGs."""
    for prefix in SOURCE_DAG_PREFIXES:
        if dag_id.startswith(prefix):
            return dag_id.removeprefix(prefix)
    return None


def deployment_specs() -> list[ConnectorSpec]:
    """The specs this deployment runs (``CDC_SOURCES``)."""
    return enabled_specs(load_specs())


def _connection(conn_id: str) -> Any:
    """An Airflow connection, read in the API server (core model: metadata database and secrets backends)."""
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


def connect_client() -> KafkaConnectClient:
    """A Kafka Connect client from ``kafka_connect_default`` (short timeouts, one retry: this serves a page)."""
    conn = _connection(KAFKA_CONNECT_CONN_ID)
    host = (conn.host or "127.0.0.1").rstrip("/")
    base = host if "://" in host else f"{conn.schema or 'http'}://{host}:{conn.port or 8083}"
    auth = (conn.login, conn.password or "") if conn.login else None
    return KafkaConnectClient(base, timeout=(2.0, 5.0), retries=1, auth=auth)


def kafka_bootstrap(spec: ConnectorSpec) -> str:
    """``bootstrap.servers`` of ``kafka_default``, else the spec's."""
    try:
        return str(_connection(KAFKA_CONN_ID).extra_dejson.get("bootstrap.servers") or spec.kafka_bootstrap_servers)
    except Exception:  # noqa: BLE001 - no connection: the spec's servers
        return spec.kafka_bootstrap_servers


def source_view(spec: ConnectorSpec, lake: Part, statuses: Part) -> SourceView:
    """Read every part of one source's view (``lake``: a :class:`LakeMonitor`, or why the lake cannot be opened)."""
    view = SourceView(spec)
    if lake.error:
        for name in ("lag", "batches", "held_transactions", "schema_changes", "quarantine", "dead_letters"):
            setattr(view, name, Part(error=lake.error))
        view.reconciliation = Part(error=lake.error)
    if statuses.error:
        view.connector = Part(error=statuses.error)
    else:
        found = (statuses.value or {}).get(spec.connect_name)
        view.connector = Part(found) if found else Part(error=f"connector {spec.connect_name} is not registered")
    if lake.error:
        return view
    monitor: LakeMonitor = lake.value
    ledger = _read("the ledger", lambda: monitor.ledger(spec.name))
    committed = ledger.value[0] if ledger.value else None
    view.lag = (
        Part(error=ledger.error)
        if ledger.error
        else _read(
            "Kafka lag",
            lambda: kafka_lag(kafka_bootstrap(spec), spec.topic_prefix, committed.next_offsets if committed else {}),
        )
    )
    view.batches = _read("batches", lambda: monitor.batches(spec.name, BATCHES_SHOWN))
    view.held_transactions = _read("transactions", lambda: monitor.held_transactions(spec.name))
    view.schema_changes = _read("schema changes", lambda: monitor.schema_changes(spec.name))
    view.quarantine = _read("quarantine", lambda: monitor.quarantine(spec.name))
    view.dead_letters = _read("dead letters", lambda: monitor.dead_letter_counts(spec.name))
    view.reconciliation = _read("reconciliation", lambda: monitor.reconciliation(spec.name))
    return view


def source_views(names: list[str] | None = None) -> list[SourceView]:
    """The views of the deployment's sources (or of ``names``)."""
    specs = [s for s in deployment_specs() if names is None or s.name in names]
    lake = _read("the lake", LakeMonitor)
    client = _read("the Kafka Connect connection", connect_client)
    statuses = (
        Part(error=client.error)
        if client.error
        else _read("Kafka Connect", lambda: client.value.list_connectors(expand_status=True))
    )
    return [source_view(spec, lake, statuses) for spec in specs]


def lag_of(view: SourceView) -> list[PartitionLag]:
    return list(view.lag.value or [])


def environment_label() -> str:
    """Where the lake is, for the page header."""
    configured = settings()
    return f"lake: {configured.lake_uri if configured.lake_kind == 'rest' else configured.lake_dir or '.lake'}"
