"""How each source is doing, read from the lake's audit tables and Kafka (pyiceberg and confluent-kafka: no Spark).

What the CDC view in Airflow shows, and what ``cdc_ingest__<source>`` asks before it starts a Spark job:

* :class:`LakeMonitor` reads ``lake.cdc_audit.*``: the batches of a source or of every source (records,
  per-table counts, transactions, phases, the source commit times of their changes), dead letters, schema
  changes, quarantined tables and the last reconciliation results; ``cdclake audit`` and ``cdclake quarantine
  list`` show what it reads;
* :func:`kafka_lag` compares the end offsets of the source's topics with the offsets the lake committed;
* :func:`pending_work` says whether a batch has anything to do (new records, an interrupted batch to redo,
  a quarantine release to apply).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.lake import LakeConfig
from cdclake.lake.catalog import AUDIT_NAMESPACE

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from cdclake.connectors import ConnectorSpec
    from cdclake.ingest.ledger import BatchRecord
    from cdclake.ingest.lock import Holder
    from cdclake.ingest.quarantine import QuarantineState

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a source's topics: its end offset, the lake's next offset there, the difference."""

    topic: str
    partition: int
    end: int
    committed: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


def partition_lag(
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int],
) -> list[PartitionLag]:
    """Lag per partition (pure): a partition the lake never read counts from its earliest offset."""
    return [
        PartitionLag(topic, partition, end, committed.get((topic, partition), earliest.get((topic, partition), 0)))
        for (topic, partition), end in sorted(latest.items())
    ]


@dataclass(frozen=True)
class Batch:
    """One committed batch of a source, as the ledger records it.

    The typed columns of the ledger row are read first; a row written before they existed falls back to its
    summary JSON (:attr:`summary`, as the batch wrote it).
    """

    batch_id: str
    seq: int
    committed_at: datetime
    planned_at: datetime | None
    records: int
    dead_lettered: int
    tables: dict[str, dict[str, Any]]
    table_counts: list[dict[str, Any]]
    transactions: dict[str, int]
    phases: dict[str, float]
    source_ts: dict[str, str]
    problems: list[str]
    redo: bool
    status: str
    source: str = ""
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def applied(self) -> int:
        return sum(int(t.get("applied") or 0) for t in self.tables.values())

    @property
    def skipped(self) -> int:
        return sum(int(t.get("skipped") or 0) for t in self.tables.values())

    @property
    def duration_s(self) -> float:
        """Planned to committed (the job's own phases when the planned row is missing)."""
        if self.planned_at is not None:
            return max(0.0, (self.committed_at - self.planned_at).total_seconds())
        return sum(self.phases.values())

    @property
    def latency_s(self) -> float | None:
        """Commit time minus the oldest change's source commit time: the longest a change of the batch waited
        to become visible in the lake."""
        first = self.source_ts.get("first")
        return (self.committed_at - datetime.fromisoformat(first)).total_seconds() if first else None

    @property
    def latency_newest_s(self) -> float | None:
        """Commit time minus the newest change's source commit time (how fresh the lake was right after)."""
        last = self.source_ts.get("last")
        return (self.committed_at - datetime.fromisoformat(last)).total_seconds() if last else None

    @property
    def throughput(self) -> float | None:
        """Records per second of the batch's duration."""
        return self.records / self.duration_s if self.duration_s > 0 else None

    @property
    def dead_letters(self) -> dict[str, dict[str, int]]:
        """Dead-lettered records per topic and reason (the summary's ``dead_letters``; empty when the batch
        had none or its summary was written before the breakdown existed)."""
        return dict(self.summary.get("dead_letters") or {})


class LakeMonitor:
    """Reads the lake's audit tables (pyiceberg).

    Args:
        lake: the lake (default: from ``CDC_LAKE_*``).
        catalog: an open pyiceberg catalog of it (default: loaded from ``lake``).
    """

    def __init__(self, lake: LakeConfig | None = None, catalog: Catalog | None = None) -> None:
        from pyiceberg.catalog import load_catalog

        self.lake = lake or LakeConfig.from_env()
        if catalog is None:
            self.lake.ensure_dirs()  # an embedded lake before its first batch: an empty catalog
            catalog = load_catalog(**self.lake.pyiceberg_properties())
        self.catalog = catalog

    def _table(self, name: str) -> Any:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return self.catalog.load_table((AUDIT_NAMESPACE, name))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def has_table(self, name: str) -> bool:
        """Whether the audit table ``lake.cdc_audit.<name>`` exists."""
        return self._table(name) is not None

    def _rows(self, name: str, source: str | None, fields: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The rows of an audit table, of one source or (``source`` None) of every source."""
        from pyiceberg.expressions import AlwaysTrue, EqualTo

        table = self._table(name)
        if table is None:
            return []
        selected = {"selected_fields": tuple(fields)} if fields else {}
        row_filter = EqualTo("source", source) if source is not None else AlwaysTrue()
        return list(table.scan(row_filter=row_filter, **selected).to_arrow().to_pylist())

    def ledger(self, source: str) -> tuple[BatchRecord | None, BatchRecord | None]:
        """(last committed batch, interrupted batch to redo), as the next batch will see them."""
        from cdclake.ingest.ledger import BATCHES, BatchLedger

        if self._table(BATCHES) is None:
            return None, None
        return BatchLedger(None, source, self.lake).last()  # type: ignore[arg-type] - pyiceberg only, no session

    def batches(self, source: str | None, last: int = 50) -> list[Batch]:
        """The last committed batches of ``source`` (None: of every source), newest first: by the ledger's
        sequence within a source, by commit time across sources."""
        from cdclake.ingest.ledger import BATCHES, COMMITTED, PLANNED

        rows = self._rows(BATCHES, source)
        planned = {(r["source"], r["batch_id"]): r["recorded_at"] for r in rows if r["status"] == PLANNED}
        order = (lambda r: r["seq"]) if source is not None else (lambda r: (r["recorded_at"], r["seq"]))
        committed = sorted((r for r in rows if r["status"] == COMMITTED), key=order, reverse=True)
        out = []
        for row in committed[:last]:
            summary = json.loads(row["summary"] or "{}")
            tx_counts = (summary.get("transactions") or {}).get("counts") or {}
            tx = {
                k: int(row[f"tx_{k}"] if row.get(f"tx_{k}") is not None else tx_counts.get(k) or 0)
                for k in ("complete", "held", "mismatched", "expired")
            }
            phases = dict(row.get("phase_seconds") or []) or dict(summary.get("phases_s") or {})
            out.append(
                Batch(
                    batch_id=row["batch_id"],
                    seq=int(row["seq"]),
                    committed_at=_utc(row["recorded_at"]) or datetime.now(UTC),
                    planned_at=_utc(planned.get((row["source"], row["batch_id"]))),
                    records=int(row.get("records") or summary.get("records") or 0),
                    dead_lettered=int(row.get("dead_lettered") or summary.get("dead_lettered") or 0),
                    tables=dict(summary.get("tables") or {}),
                    table_counts=list(row.get("table_counts") or []),
                    transactions=tx,
                    phases={k: float(v) for k, v in phases.items()},
                    source_ts=dict(summary.get("source_ts") or {}),
                    problems=list((summary.get("checks") or {}).get("problems") or []),
                    redo=bool(summary.get("redo")),
                    status=str(summary.get("status") or row["status"]),
                    source=row["source"],
                    summary=summary,
                )
            )
        return out

    def dead_letters(self, source: str, limit: int = 100, batch_id: str | None = None) -> list[dict[str, Any]]:
        """The source's dead letters, newest first (``key``/``value`` as recorded)."""
        rows = self._rows("dead_letters", source)
        if batch_id:
            rows = [r for r in rows if r["batch_id"] == batch_id]
        rows.sort(key=lambda r: (r["recorded_at"], r["topic"], r["partition"], r["offset"]), reverse=True)
        return rows[:limit]

    def dead_letter_counts(self, source: str) -> list[tuple[str, str, int]]:
        """``(topic, reason, records)`` of every dead letter of the source, most frequent first."""
        counts: dict[tuple[str, str], int] = {}
        for row in self._rows("dead_letters", source, ("source", "topic", "reason")):
            key = (row["topic"], row["reason"])
            counts[key] = counts.get(key, 0) + 1
        return sorted(((t, r, n) for (t, r), n in counts.items()), key=lambda x: (-x[2], x[0], x[1]))

    def schema_changes(self, source: str, limit: int = 50) -> list[dict[str, Any]]:
        """The source's recorded schema changes, newest first."""
        rows = self._rows("schema_changes", source)
        rows.sort(key=lambda r: r["recorded_at"], reverse=True)
        return rows[:limit]

    def held_transactions(self, source: str) -> list[dict[str, Any]]:
        """The transactions the source's last batch held (incomplete: left for the next batch), one row per
        transaction and data collection."""
        rows = self._rows("transactions", source)
        if not rows:
            return []
        last = max(rows, key=lambda r: r["recorded_at"])["batch_id"]
        return sorted(
            (r for r in rows if r["batch_id"] == last and r["status"] == "held"),
            key=lambda r: (r["tx_id"], r["data_collection"]),
        )

    def quarantine(self, source: str | None) -> list[QuarantineState]:
        """The quarantined tables of ``source`` (None: of every source), by source and table
        (:func:`cdclake.ingest.quarantine.catalog_states`)."""
        from cdclake.ingest.quarantine import catalog_states

        if self._table("quarantine") is None:
            return []
        return sorted(catalog_states(self.catalog, source).values(), key=lambda s: (s.source, s.table))

    def lock_holder(self, source: str) -> Holder | None:
        """Who holds the source's lock now (a batch, maintenance or reconciliation in progress), if anyone."""
        from cdclake.ingest.lock import LOCKS, current_holder

        rows = self._rows(LOCKS, source)
        return current_holder(rows, datetime.now(UTC), lambda owner: owner.alive()) if rows else None

    def reconciliation(self, source: str) -> list[dict[str, Any]]:
        """The last source-vs-lake result of each of the source's tables (``cdc_reconcile``)."""
        from cdclake.reconcile.audit import latest_results

        return latest_results(self.catalog, [source])


def kafka_lag(
    bootstrap: str, topic_prefix: str, committed: Mapping[TopicPartition, int], timeout_s: float = 5.0
) -> list[PartitionLag]:
    """Lag of the source's topics (data, transactions, schema changes) behind the lake's committed offsets.

    Raises:
        RecordSourceError: when Kafka cannot be reached within ``timeout_s``.
    """
    from cdclake.ingest.sources import KafkaRecordSource, source_topic_patterns

    earliest, latest = KafkaRecordSource(bootstrap, source_topic_patterns(topic_prefix)).watermarks(timeout_s)
    return partition_lag(earliest, latest, committed)


@dataclass(frozen=True)
class PendingWork:
    """What a batch of a source would do now."""

    lag: list[PartitionLag] = field(default_factory=list)
    redo: str | None = None
    releases: tuple[str, ...] = ()
    #: who holds the source's lock (a run in progress: a PLANNED batch of it is not interrupted)
    holder: Holder | None = None

    @property
    def records(self) -> int:
        return sum(p.lag for p in self.lag)

    def __bool__(self) -> bool:
        return bool(self.records or self.redo or self.releases)

    def describe(self) -> str:
        parts = []
        if self.records:
            behind = [f"{p.topic}/{p.partition} +{p.lag}" for p in self.lag if p.lag]
            parts.append(f"{self.records} new record(s) ({', '.join(behind[:10])})")
        if self.redo:
            state = f"in progress ({self.holder.owner.describe()})" if self.holder else "interrupted, to redo"
            parts.append(f"batch {self.redo} {state}")
        elif self.holder:
            parts.append(f"{self.holder.owner.describe()} holds the source's lock")
        if self.releases:
            parts.append(f"quarantine release(s) of {', '.join(self.releases)}")
        return "; ".join(parts) or "nothing new"


def pending_work(spec: ConnectorSpec, monitor: LakeMonitor | None = None, bootstrap: str | None = None) -> PendingWork:
    """Whether a batch of ``spec`` has anything to do (see :class:`PendingWork`).

    Raises:
        RecordSourceError: when Kafka cannot be reached.
    """
    monitor = monitor or LakeMonitor()
    committed, pending = monitor.ledger(spec.name)
    offsets = committed.next_offsets if committed else {}
    lag = kafka_lag(bootstrap or spec.kafka_bootstrap_servers, spec.topic_prefix, offsets)
    releases = tuple(s.table for s in monitor.quarantine(spec.name) if s.release is not None)
    holder = monitor.lock_holder(spec.name)
    return PendingWork(lag=lag, redo=pending.batch_id if pending else None, releases=releases, holder=holder)


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def row_freshness(table: Any, row_filter: Any = None, since: datetime | None = None) -> list[float]:
    """Seconds from each row's source commit to the lake commit that made the row as it is now visible.

    A row's ``_cdc_source_ts`` is its change's commit time in the source database; ``_cdc_ingested_at`` is when
    the batch wrote it, and the first snapshot of the table at or after that made it visible.

    Args:
        table: a pyiceberg table of the lake (with cdclake's metadata columns).
        row_filter: a pyiceberg row filter selecting the rows to measure (default: all).
        since: only rows whose change was committed in the source at or after this time (default: all).
    """
    from bisect import bisect_left

    snapshots = sorted(s.timestamp_ms for s in table.metadata.snapshots)
    scan = table.scan(
        row_filter=row_filter if row_filter is not None else "True",
        selected_fields=("_cdc_source_ts", "_cdc_ingested_at"),
    )
    out = []
    for row in scan.to_arrow().to_pylist():
        source, ingested = _utc(row["_cdc_source_ts"]), _utc(row["_cdc_ingested_at"])
        if source is None or ingested is None or (since is not None and source < since):
            continue
        i = bisect_left(snapshots, int(ingested.timestamp() * 1000))
        if i < len(snapshots):
            out.append(max(0.0, snapshots[i] / 1000 - source.timestamp()))
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by the nearest rank, None for no values."""
    if not values:
        return None
    import math

    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]
