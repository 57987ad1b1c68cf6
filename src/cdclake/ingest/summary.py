"""What one batch did: the summary the job builds (:class:`BatchSummary`, :class:`TableResult`) and the
typed form a reader parses back from its JSON (:class:`IngestSummary`, :func:`load_summary`).

The JSON is written by ``jobs/ingest.py --summary-json PATH`` and into the ledger's committed row. The
fields the DAGs rely on::

    {"batch_id": str | null,            # null when there was nothing new
     "source": str,
     "status": str,                     # "committed", "no-new-records" or "source-busy"
     "tables": {"<iceberg identifier>": {"applied": int, "skipped": int, "dead_lettered": int, ...}},
     "changed_tables": [identifiers],
     "offsets": {...},                   # the batch's Kafka offset ranges
     "dead_lettered": int,              # records written to lake.cdc_audit.dead_letters
     "dead_letters": {"<topic>": {"<reason>": int}},  # the same records per topic and reason
     "accepted_gaps": [{"topic", "partition", "kind", "committed", "resumed_at", "log_end",
                        "accepted_by", "accepted_at", "detail"}],  # records lost in Kafka, accepted by the run
     "checks": {"ok": bool, "problems": [str]}}  # the batch's own consistency checks

``dead_letters`` sums to ``dead_lettered``; its reasons are the ``reason`` codes of ``cdc_audit.dead_letters``.
Dead letters are not a consistency problem (``checks`` leaves them out): the batch commits what it could
decode, and whoever runs it decides what they mean (the CLI exits 65, the ingest DAG fails its
``dead_letters`` task).

``accepted_gaps`` lists the topic-partitions the batch started past records Kafka no longer held, as the run was
told to (``--accept-gap``, :class:`cdclake.ingest.offsets.AcceptedGap`); they are warnings, not problems.

Other keys (``records``, ``dead_lettered_by_partition``, ``phases_s``, per-table details) are kept as they are by the
reader and passed through to Asset-event extras. This module imports neither Spark nor Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cdclake.exceptions import ConfigError

#: ``status`` of a committed batch.
COMMITTED_STATUS = "committed"
#: ``status`` of a run that found nothing to do.
NO_NEW_RECORDS = "no-new-records"
#: ``status`` of a run that found the source's lock held by another run: it read and wrote nothing.
SOURCE_BUSY = "source-busy"
#: ``reason`` under which a dead letter without one is counted.
NO_REASON = "unknown"


@dataclass(frozen=True)
class DeadLetterCounts:
    """A batch's dead letters counted two ways (:func:`dead_letter_counts`).

    Attributes:
        by_partition: ``"<topic>/<partition>"`` -> records (the summary's ``dead_lettered_by_partition``).
        by_reason: topic -> reason code -> records (the summary's ``dead_letters``).
    """

    by_partition: dict[str, int] = field(default_factory=dict)
    by_reason: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_partition.values())


def dead_letter_counts(rows: Iterable[tuple[str, int, str | None, int]]) -> DeadLetterCounts:
    """The batch's dead letters counted per topic-partition and per topic and reason, from
    ``(topic, partition, reason, count)`` rows (one aggregation of the dead-letter frame); both sum to the
    same total. A row without a reason counts under :data:`NO_REASON`."""
    by_partition: dict[tuple[str, int], int] = {}
    by_reason: dict[str, dict[str, int]] = {}
    for topic, partition, reason, n in rows:
        if not n:
            continue
        tp = (topic, int(partition))
        by_partition[tp] = by_partition.get(tp, 0) + int(n)
        reasons = by_reason.setdefault(topic, {})
        reasons[reason or NO_REASON] = reasons.get(reason or NO_REASON, 0) + int(n)
    return DeadLetterCounts(
        by_partition={f"{t}/{p}": n for (t, p), n in sorted(by_partition.items())},
        by_reason={t: dict(sorted(r.items())) for t, r in sorted(by_reason.items())},
    )


def describe_dead_letters(dead_letters: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per topic and reason of a summary's ``dead_letters``: ``<topic>: <count> record(s), reason <reason>``."""
    return [
        f"{topic}: {n} record(s), reason {reason}"
        for topic, reasons in dead_letters.items()
        for reason, n in reasons.items()
    ]


@dataclass
class TableResult:
    """What happened to one table in one batch."""

    table: str
    mode: str
    events: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    skipped_stale: int = 0
    already_applied: bool = False
    quarantined: str | None = None
    schema_changes: list[str] = field(default_factory=list)
    watermark: list[int] | None = None
    applied_by_op: dict[str, int] = field(default_factory=dict)
    skipped_by_op: dict[str, int] = field(default_factory=dict)
    decoded: dict[str, int] = field(default_factory=dict)
    dead_lettered: int = 0
    released: dict[str, Any] | None = None

    def count_ops(self, counts: Mapping[tuple[str, bool], int]) -> None:
        """Add applied and skipped (stale) events, per op and in total, from ``{(op, stale): n}``."""
        for (op, stale), n in sorted(counts.items()):
            target = self.skipped_by_op if stale else self.applied_by_op
            target[op] = target.get(op, 0) + n
        self.skipped_stale = sum(self.skipped_by_op.values())
        self.applied = sum(self.applied_by_op.values())

    def as_dict(self) -> dict[str, Any]:
        out = {
            "mode": self.mode,
            "events": self.events,
            "applied": self.applied,
            "skipped": self.skipped_stale,
            "already_applied": self.already_applied,
            "quarantined": self.quarantined,
            "schema_changes": self.schema_changes,
            "watermark": self.watermark,
            "decoded": self.decoded,
            "applied_by_op": self.applied_by_op,
            "skipped_by_op": self.skipped_by_op,
            "dead_lettered": self.dead_lettered,
        }
        if self.released is not None:
            out["released"] = self.released
        return out


@dataclass
class BatchSummary:
    """What one batch did (also written, as JSON, into the ledger's committed row)."""

    source: str
    batch_id: str | None
    status: str
    ranges: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    dead_letters: DeadLetterCounts = field(default_factory=DeadLetterCounts)
    phases: dict[str, float] = field(default_factory=dict)
    redo: bool = False
    transactions: dict[str, Any] = field(default_factory=dict)

    held_everything: bool = False
    #: whether ``max_records`` cut the batch short of a partition's end (a time cut may read fewer records than it)
    capped: bool = False
    schema_problems: list[str] = field(default_factory=list)
    schema_cuts: dict[str, str] = field(default_factory=dict)
    #: how the decoder found the batch's schema versions: ``sample`` or ``pass`` (see docs/decoding.md)
    discovery: str | None = None
    #: the first and last source commit time (``source.ts_ms``) of the batch's change rows, ISO 8601 UTC
    source_ts: dict[str, str] = field(default_factory=dict)
    #: the gaps in Kafka's logs the batch started past, as accepted by the run
    #: (:meth:`cdclake.ingest.offsets.AcceptedGap.as_dict`)
    accepted_gaps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed_tables(self) -> list[str]:
        return sorted(t for t, r in self.tables.items() if r.get("applied") and not r.get("already_applied"))

    @property
    def dead_lettered(self) -> int:
        """The records the batch wrote to ``cdc_audit.dead_letters``."""
        return self.dead_letters.total

    def problems(self) -> list[str]:
        """What the batch's own consistency checks found: quarantined tables, schema changes its events do
        not explain, transactions whose END counts differ from what was decoded or that expired."""
        problems = [f"{t}: quarantined: {r['quarantined']}" for t, r in self.tables.items() if r.get("quarantined")]
        problems += list(self.schema_problems)
        problems += [
            f"transaction {tx}: {status}"
            for status in ("mismatched", "expired")
            for tx in self.transactions.get("ids", {}).get(status, [])
        ]
        return problems

    def as_dict(self) -> dict[str, Any]:
        problems = self.problems()
        return {
            "source": self.source,
            "batch_id": self.batch_id,
            "status": self.status,
            "redo": self.redo,
            "offsets": self.ranges,
            "records": self.records,
            "capped": self.capped,
            "counts": self.counts,
            "tables": self.tables,
            "changed_tables": self.changed_tables,
            "dead_lettered": self.dead_lettered,
            "dead_lettered_by_partition": self.dead_letters.by_partition,
            "dead_letters": self.dead_letters.by_reason,
            "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
            "transactions": self.transactions,
            "schema_cuts": self.schema_cuts,
            "discovery": self.discovery,
            "source_ts": self.source_ts,
            "accepted_gaps": self.accepted_gaps,
            "checks": {"ok": not problems, "problems": problems},
        }


class _SummaryModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class BatchChecks(_SummaryModel):
    """The job's own consistency checks."""

    ok: bool
    problems: tuple[str, ...] = ()


class IngestSummary(_SummaryModel):
    """A batch summary as read back from its JSON (:meth:`BatchSummary.as_dict`)."""

    batch_id: str | None = None
    source: str
    status: str | None = None
    message: str | None = None
    tables: dict[str, dict[str, Any]] = Field(default_factory=dict)
    changed_tables: tuple[str, ...] = ()
    offsets: Any = None
    dead_lettered: int = 0
    dead_letters: dict[str, dict[str, int]] = Field(default_factory=dict)
    accepted_gaps: tuple[dict[str, Any], ...] = ()
    checks: BatchChecks

    def changed(self, identifier: str) -> bool:
        """Whether the batch committed changes to ``identifier``."""
        return identifier in self.changed_tables

    def problems(self) -> list[str]:
        """What the batch's consistency checks found: the run fails when there is any (``checks.ok`` false)."""
        if self.checks.ok:
            return []
        return list(self.checks.problems) or ["checks.ok is false (the job reported no problem text)"]

    def dead_letter_report(self) -> list[str]:
        """The batch's dead letters, one line per topic and reason (``<topic>: <count> record(s), reason <reason>``);
        empty when it has none. A summary without ``dead_letters`` (written before it existed) gives its total."""
        lines = describe_dead_letters(self.dead_letters)
        if self.dead_lettered and not lines:
            lines.append(f"{self.dead_lettered} record(s), reasons not in the summary")
        return lines

    def warnings(self) -> list[str]:
        """The gaps in Kafka's logs the run accepted, then the dead-lettered records per table: not consistency
        problems (the records are gone from Kafka, or kept in ``cdc_audit.dead_letters``), see
        :meth:`dead_letter_report`."""
        gaps = [
            f"accepted gap (by {gap.get('accepted_by') or 'the interrupted run'}): {gap.get('detail')}"
            for gap in self.accepted_gaps
        ]
        dead = [
            f"{identifier}: {result.get('dead_lettered', 0)} record(s) dead-lettered"
            for identifier, result in self.tables.items()
            if result.get("dead_lettered")
        ]
        if self.dead_lettered and not dead:
            dead.append(f"batch {self.batch_id}: {self.dead_lettered} record(s) dead-lettered")
        return gaps + dead

    def event_extra(self, identifier: str) -> dict[str, Any]:
        """The Asset-event ``extra`` for one changed table: batch id, source, the table's result, the offsets."""
        result = self.tables.get(identifier)
        return {
            "batch_id": self.batch_id,
            "source": self.source,
            "table": {"applied": 0, "skipped": 0, "dead_lettered": 0, **result} if result else {},
            "offsets": self.offsets,
        }


def load_summary(data: str | Path | Mapping[str, Any]) -> IngestSummary:
    """Parse a summary from a file path, a JSON string or an already decoded mapping.

    Raises:
        ConfigError: when the file is missing or the content is not a valid summary (names the source).
    """
    where = "summary"
    if isinstance(data, Path) or (isinstance(data, str) and not data.lstrip().startswith("{")):
        path = Path(data)
        where = str(path)
        try:
            data = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the ingest summary {path}: {exc}") from exc
    try:
        return IngestSummary.model_validate_json(data) if isinstance(data, str) else IngestSummary.model_validate(data)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: not a valid ingest summary: {exc}") from exc
