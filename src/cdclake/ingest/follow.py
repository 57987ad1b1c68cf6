"""Continuous ingestion (``cdclake ingest --follow``, ``jobs/ingest.py --follow``): exactly-once batches of one
source, back to back, on one warm SparkSession.

Each batch is the scheduled mode's batch (:func:`cdclake.ingest.runner.run_capped_batch`): same ledger, same
offsets, same transaction rules, same lock. The follower takes the source's lock for each batch and releases it
when the batch commits, so a scheduled batch, a snapshot's verify step or maintenance can run between two of
its batches; a crash or a kill leaves at most one planned batch, which the next run redoes.

Between batches it asks Kafka for the end offsets of the source's topics (no Spark, no lake read) every
``poll_s`` and starts a batch when :func:`batch_due` says so: on start (an interrupted batch to redo, a
quarantine release), when an end offset moved since the last batch started, right away when the last batch was
cut by ``max_records``, and ``hold_retry_s`` after a batch that held incomplete transactions (so that their
age limit can apply them without new records).

It stops between batches, never inside one: on SIGTERM or SIGINT (:class:`StopFlag`), after ``run_for_s``, or
after ``max_batches`` batches.

A follower commits to its tables every few seconds. Each batch adds small files that a reader's scan opens, and
every commit rewrites the table's metadata with its whole snapshot list: left to the daily maintenance, a
reader's scans would take tens of times as long within minutes, and each commit more after a day. So the
follower compacts the recent files of the tables it writes every ``compact_every`` batches and keeps them to
their newest ``keep_snapshots`` snapshots (:class:`TableUpkeep`).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

from cdclake.connectors.spec import LakeMode
from cdclake.exceptions import RecordSourceError, SourceBusyError, SparkDriverError
from cdclake.ingest.lock import DEFAULT_WAIT_S, source_lock
from cdclake.ingest.summary import BatchSummary
from cdclake.spark import job_description

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import SparkSession

    from cdclake.ingest.config import SourceConfig
    from cdclake.ingest.sources import RecordSource, TopicPartition

logger = logging.getLogger(__name__)

#: ``stopped_by`` of a follower stopped by a signal, its time limit, its batch limit.
STOPPED_BY_SIGNAL, STOPPED_BY_TIME, STOPPED_BY_BATCHES = "signal", "time", "batches"
#: Consecutive failures to read Kafka's end offsets after which the follower gives up (each waits longer).
MAX_WATERMARK_FAILURES = 6
#: Snapshots a follower keeps of each table it writes (``--keep-snapshots``), and how often it looks: after the
#: first batch that changed a table, then after every :data:`TIDY_EVERY_BATCHES`-th.
KEEP_SNAPSHOTS_DEFAULT = 1000
TIDY_EVERY_BATCHES = 100
#: A follower compacts the recent files of a table after every this many batches that changed it
#: (``--compact-every``).
COMPACT_EVERY_DEFAULT = 10
#: A follower's batches hold at most this many records unless told otherwise (``--max-records``; 0: no cap). A
#: follower started on a large backlog (its first drain) then applies it in batches that each commit, its memory
#: that of a half-million-record batch: a drain's batches after the first also mark their events against the
#: stored table, and at the default 900m heap 2 of 4 drains by million-record batches failed on memory in their
#: 4th or 5th batch, none of 2 by half-million ones (docs/benchmarks.md); a batch of half a million records still
#: spreads the batch's fixed cost thin (both drained about 30K records/s).
MAX_RECORDS_DEFAULT = 500_000
#: With compaction on, a follower compacts the lake's audit tables after every this many of its batches.
AUDIT_COMPACT_EVERY_BATCHES = 100


@dataclass(frozen=True)
class FollowOptions:
    """How a follower runs.

    Attributes:
        poll_s: seconds between two looks at Kafka's end offsets while there is nothing new.
        run_for_s: stop (between batches) after this many seconds; None: until stopped.
        max_batches: stop after this many batches; None: no limit.
        hold_retry_s: seconds after a batch that held incomplete transactions before the next one, new records
            or not.
        max_records: cap on the records of one batch (None: up to the end offsets at the batch's start).
            :meth:`from_flags` sets :data:`MAX_RECORDS_DEFAULT` when the flag is left out.
        lock_wait_s: seconds a batch waits for another run of the source to release its lock; past that the
            follower waits ``poll_s`` and tries again.
        keep_snapshots: snapshots kept of each table the follower writes (:class:`TableUpkeep`); None leaves
            them all to the maintenance.
        compact_every: compact the recent files of a table after every this many batches that changed it
            (:class:`TableUpkeep`); None leaves compaction to the maintenance.
    """

    poll_s: float = 1.0
    run_for_s: float | None = None
    max_batches: int | None = None
    hold_retry_s: float = 30.0
    max_records: int | None = None
    lock_wait_s: float = DEFAULT_WAIT_S
    keep_snapshots: int | None = KEEP_SNAPSHOTS_DEFAULT
    compact_every: int | None = COMPACT_EVERY_DEFAULT

    @classmethod
    def from_flags(
        cls,
        *,
        keep_snapshots: int | None = None,
        compact_every: int | None = None,
        max_records: int | None = None,
        **options: Any,
    ) -> FollowOptions:
        """The options of a command line's flags (``--keep-snapshots``, ``--compact-every``, ``--max-records`` and
        ``options``): a flag left out (None) takes its default, and 0 turns that upkeep, or the cap, off (upkeep
        left to the maintenance; a batch up to the end offsets)."""
        return cls(
            keep_snapshots=KEEP_SNAPSHOTS_DEFAULT if keep_snapshots is None else keep_snapshots or None,
            compact_every=COMPACT_EVERY_DEFAULT if compact_every is None else compact_every or None,
            max_records=MAX_RECORDS_DEFAULT if max_records is None else max_records or None,
            **options,
        )

    def __post_init__(self) -> None:
        if self.keep_snapshots is not None and self.keep_snapshots < 1:
            raise ValueError(f"keep_snapshots must be 1 or more, not {self.keep_snapshots}")
        if self.compact_every is not None and self.compact_every < 1:
            raise ValueError(f"compact_every must be 1 or more, not {self.compact_every}")
        if self.poll_s <= 0:
            raise ValueError(f"poll_s must be above 0, not {self.poll_s}")
        if self.run_for_s is not None and self.run_for_s < 0:
            raise ValueError(f"run_for_s must be 0 or more, not {self.run_for_s}")
        if self.max_batches is not None and self.max_batches < 1:
            raise ValueError(f"max_batches must be 1 or more, not {self.max_batches}")
        if self.max_records is not None and self.max_records < 1:
            raise ValueError(f"max_records must be 1 or more, not {self.max_records}")


@dataclass
class FollowReport:
    """What a follower did, for its final summary.

    :meth:`as_dict` has the fields of a batch summary that the Airflow checks and Asset events read
    (:class:`cdclake.ingest.summary.IngestSummary`), summed over the run's batches: ``batch_id`` and ``offsets`` are
    the last committed batch's, ``tables`` adds up each table's counts (with ``batches``: how many batches changed
    it), ``changed_tables`` and ``dead_letters`` cover every batch, ``checks`` every batch's problems.
    """

    source: str
    batches: int = 0
    committed: int = 0
    records: int = 0
    dead_lettered: int = 0
    busy: int = 0
    stopped_by: str | None = None
    seconds: float = 0.0
    last: BatchSummary | None = None
    last_committed: BatchSummary | None = None
    first_batch_id: str | None = None
    problems: list[str] = field(default_factory=list)
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    dead_letters: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, result: BatchSummary) -> None:
        self.batches += 1
        self.records += result.records
        self.dead_lettered += result.dead_lettered
        self.problems += [f"batch {result.batch_id}: {p}" for p in result.problems()]
        self.last = result
        if result.batch_id is None:
            return
        self.committed += 1
        self.last_committed = result
        self.first_batch_id = self.first_batch_id or result.batch_id
        changed = set(result.changed_tables)
        for identifier, table in result.tables.items():
            total = self.tables.setdefault(identifier, {"batches": 0, "applied": 0, "skipped": 0, "dead_lettered": 0})
            total["batches"] += identifier in changed
            for key in ("applied", "skipped", "dead_lettered"):
                total[key] += int(table.get(key) or 0)
        for topic, reasons in result.dead_letters.by_reason.items():
            into = self.dead_letters.setdefault(topic, {})
            for reason, count in reasons.items():
                into[reason] = into.get(reason, 0) + count

    @property
    def changed_tables(self) -> list[str]:
        return sorted(t for t, r in self.tables.items() if r["batches"])

    def as_dict(self) -> dict[str, Any]:
        last = self.last_committed
        return {
            "source": self.source,
            "mode": "follow",
            "status": "stopped" if self.stopped_by else "running",
            "stopped_by": self.stopped_by,
            "batches": self.batches,
            "committed_batches": self.committed,
            "first_batch_id": self.first_batch_id,
            "batch_id": last.batch_id if last is not None else None,
            "offsets": last.ranges if last is not None else None,
            "records": self.records,
            "tables": self.tables,
            "changed_tables": self.changed_tables,
            "dead_lettered": self.dead_lettered,
            "dead_letters": self.dead_letters,
            "busy": self.busy,
            "seconds": round(self.seconds, 1),
            "last_batch": self.last.as_dict() if self.last is not None else None,
            "checks": {"ok": not self.problems, "problems": self.problems},
        }


class TableUpkeep:
    """Keeps the tables a follower writes (and an upsert table's tombstones) quick to scan and to commit to.

    Each batch adds small files to every partition it touches (the append's data file, the merge-on-read MERGE's
    data and position-delete files). The follower's own scans are narrowed to a batch's keys and skip most of
    them; a reader's scan opens them all, and within minutes takes tens of times as long. Each commit also
    rewrites the table's metadata with its whole snapshot list. So after a batch, for each table it applied
    events to, counting those batches per table:

    - every ``compact_every``-th batch compacts its recent files, and those of its tombstones
      (:func:`cdclake.lake.maintenance.compact_recent_files`), when ``compact_every`` is set. The tables are
      staggered: the n-th table the follower meets (a table and its tombstones count as two) is compacted
      n batches earlier in the cycle, so that one batch does not pay for all of them;
    - the first batch, then every ``tidy_every``-th, expires its snapshots but the newest ``keep``
      (:func:`cdclake.lake.maintenance.keep_newest_snapshots`, in the metadata only: the files only those
      snapshots referenced are left to the maintenance's orphan-file removal), when ``keep`` is set.

    And after every ``audit_every``-th batch of the follower, when ``compact_every`` is set, it compacts the
    recent files of the lake's audit tables (but the source locks', see
    :func:`cdclake.lake.maintenance.audit_policy_of`): the ledger gets two files per batch, and its read before
    each batch lists them all. Other sources' writers retry their appends when the compaction commits first.

    A failure is logged and left to the next time: the batch is committed, the upkeep is housekeeping. But a
    Spark driver that ran out of memory or exited stops the follower (:class:`SparkDriverError`), as in a batch.
    Exactly-once is not touched: only the redo of a batch still to commit looks for its own snapshots, and the
    upkeep runs after its batch committed, inside the source's lock. Time travel reaches back ``keep`` commits.
    """

    def __init__(
        self,
        spark: SparkSession,
        keep: int | None,
        compact_every: int | None = None,
        tidy_every: int = TIDY_EVERY_BATCHES,
        audit_every: int = AUDIT_COMPACT_EVERY_BATCHES,
    ) -> None:
        self.spark = spark
        self.keep = keep
        self.compact_every = compact_every
        self.tidy_every = tidy_every
        self.audit_every = audit_every
        self._batches: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        self._runs = 0

    def due(self, identifier: str, mode: str = LakeMode.UPSERT) -> tuple[list[str], list[str]]:
        """Counts a batch that applied events to ``identifier`` (a ``mode`` table); returns the tables to compact now
        and those whose snapshots to expire now, of ``identifier`` and, for an ``upsert`` table, its tombstones."""
        from cdclake.lake.names import tombstone_identifier

        n = self._batches[identifier] = self._batches.get(identifier, 0) + 1
        names = (identifier, tombstone_identifier(identifier)) if mode == LakeMode.UPSERT else (identifier,)
        compact = []
        if self.compact_every is not None:
            for name in names:
                offset = self._offsets.setdefault(name, len(self._offsets))
                if (n + offset) % self.compact_every == 0:
                    compact.append(name)
        tidy = list(names) if self.keep is not None and (n - 1) % self.tidy_every == 0 else []
        return compact, tidy

    def after(self, result: BatchSummary) -> dict[str, int]:
        """The upkeep due on the tables ``result`` applied events to; returns how many tables had files rewritten,
        and how many snapshots were expired."""
        done = {"compacted": 0, "expired": 0}
        for identifier, table in sorted(result.tables.items()):
            if not table.get("events"):
                continue
            mode = table.get("mode", LakeMode.UPSERT)
            compact, tidy = self.due(identifier, mode)
            deletes = mode != LakeMode.APPEND
            done["compacted"] += sum(self._compact(name, deletes=deletes) for name in compact)
            done["expired"] += sum(self._expire(name) for name in tidy)
        self._runs += 1
        if self.compact_every is not None and self._runs % self.audit_every == 0:
            done["compacted"] += sum(self._compact(name, deletes=False) for name in self._audit_tables())
        return done

    def _audit_tables(self) -> list[str]:
        """The audit tables to compact (those whose maintenance policy rewrites data files)."""
        from cdclake.lake.maintenance import audit_identifiers, audit_policy_of

        try:
            return [name for name in audit_identifiers(self.spark) if audit_policy_of(name).rewrite_data_files]
        except Exception:  # noqa: BLE001 - see the class docstring
            logger.warning("the audit tables could not be listed; their compaction is left for later", exc_info=True)
            return []

    def _compact(self, name: str, *, deletes: bool) -> bool:
        """Compacts table ``name``; True when it rewrote files."""
        from cdclake.lake.maintenance import compact_recent_files

        started = time.monotonic()
        try:
            with job_description(self.spark, f"cdclake follower upkeep: compact {name}"):
                results = compact_recent_files(self.spark, name, deletes=deletes)
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            self._unless_driver_lost(exc, name, "compaction")
            logger.warning("table %s: compaction failed; left for later", name, exc_info=True)
            return False
        data = (results.get("rewrite_data_files") or [{}])[0]
        deleted = (results.get("rewrite_position_delete_files") or [{}])[0]
        rewritten = data.get("rewritten_data_files_count") or 0
        dropped = (data.get("removed_delete_files_count") or 0) + (deleted.get("rewritten_delete_files_count") or 0)
        if rewritten or dropped:
            logger.info(
                "table %s: compacted in %.1f s (%d data files into %s, %d delete files rewritten or dropped)",
                name,
                time.monotonic() - started,
                rewritten,
                data.get("added_data_files_count"),
                dropped,
            )
        return bool(rewritten or dropped)

    def _expire(self, name: str) -> int:
        from cdclake.lake.maintenance import keep_newest_snapshots

        assert self.keep is not None
        try:
            with job_description(self.spark, f"cdclake follower upkeep: expire snapshots of {name}"):
                n = keep_newest_snapshots(self.spark, name, self.keep)
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            self._unless_driver_lost(exc, name, "snapshot tidy-up")
            logger.warning("table %s: snapshot tidy-up failed; left for later", name, exc_info=True)
            return 0
        if n:
            logger.info("table %s: %d old snapshot(s) expired, the newest %d kept", name, n, self.keep)
        return n

    def _unless_driver_lost(self, exc: Exception, name: str, step: str) -> None:
        """Raise a :class:`SparkDriverError` when ``exc`` is the driver running out of memory or exiting."""
        from cdclake.spark import driver_failure, more_heap_advice

        what = driver_failure(self.spark, exc)
        if what is not None:
            raise SparkDriverError(
                f"table {name}: the Spark driver {what} in the follower's {step}, after its batch committed. "
                f"Give the driver more heap: {more_heap_advice()}."
            ) from exc


class StopFlag:
    """Tells a follower to stop after its current batch; :meth:`on_signals` sets it on SIGTERM and SIGINT."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def set(self, reason: str = STOPPED_BY_SIGNAL) -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True at once when the flag is (or gets) set."""
        return self._event.wait(max(0.0, seconds))

    @contextmanager
    def on_signals(self, *signums: int) -> Iterator[StopFlag]:
        """Within the block, SIGTERM and SIGINT (or ``signums``) set the flag instead of ending the process; the
        previous handlers come back after it. Only the main thread can install signal handlers."""
        chosen = signums or (signal.SIGTERM, signal.SIGINT)

        def handler(signum: int, _frame: FrameType | None) -> None:
            logger.warning("%s received: stopping after the current batch", signal.Signals(signum).name)
            self.set(STOPPED_BY_SIGNAL)

        previous = {s: signal.signal(s, handler) for s in chosen}
        try:
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)


def batch_due(
    latest: Mapping[TopicPartition, int],
    seen: Mapping[TopicPartition, int] | None,
    *,
    cut: bool,
    held: bool,
    since_last_s: float,
    hold_retry_s: float,
) -> bool:
    """Whether the follower starts a batch now (pure).

    Args:
        latest: the source topics' end offsets now.
        seen: their end offsets when the last batch started (None before the first batch).
        cut: the last batch stopped at ``max_records`` (more records wait).
        held: the last batch held incomplete transactions.
        since_last_s: seconds since the last batch ended.
        hold_retry_s: how long a batch that held transactions waits for new records before it runs anyway.
    """
    if seen is None or cut:
        return True
    if any(end > seen.get(tp, 0) for tp, end in latest.items()):
        return True
    return held and since_last_s >= hold_retry_s


def batch_line(summary: dict[str, Any], now: datetime | None = None) -> str:
    """One line of ``ingest --follow`` for a batch: what it read and applied, how long it took, and how long after
    its last source commit its changes became visible."""
    if summary["batch_id"] is None:
        return f"{summary['source']}: nothing new"
    applied = sum(int(t.get("applied") or 0) for t in summary["tables"].values())
    line = (
        f"batch {summary['batch_id']}: {summary['records']} records, {applied} applied, "
        f"{summary['dead_lettered']} dead-lettered, {sum(summary['phases_s'].values()):.1f} s"
    )
    last = (summary.get("source_ts") or {}).get("last")
    if last:
        committed = datetime.fromisoformat(last.replace("Z", "+00:00"))
        lag = ((now or datetime.now(UTC)) - committed).total_seconds()
        line += f", visible {lag:.1f} s after its last source commit"
    problems = summary.get("checks", {}).get("problems") or []
    return line + (f"; problems: {'; '.join(problems)}" if problems else "")


def _held(result: BatchSummary) -> bool:
    return result.held_everything or bool(result.transactions.get("counts", {}).get("held"))


def follow(
    spark: SparkSession,
    source: SourceConfig,
    records: RecordSource,
    catalog: Catalog,
    run_batch: Callable[[SparkSession, SourceConfig, RecordSource, int | None], BatchSummary],
    *,
    options: FollowOptions | None = None,
    stop: StopFlag | None = None,
    on_batch: Callable[[BatchSummary], None] | None = None,
) -> FollowReport:
    """Run batches of ``source`` as records arrive until ``stop`` is set, or a limit of ``options`` is reached.

    ``catalog`` holds the source's lock (the lake's pyiceberg catalog). ``run_batch(spark, source, records,
    max_records)`` runs one batch (:func:`cdclake.ingest.runner.run_capped_batch`). ``on_batch`` gets each
    batch's summary after its table upkeep (:class:`TableUpkeep`), whose seconds are the summary's last phase,
    ``upkeep``.

    Raises:
        RecordSourceError: when Kafka's end offsets could not be read :data:`MAX_WATERMARK_FAILURES` times in a
            row. A batch's own error ends the follower as it is raised; the next run redoes that batch.
    """
    options = options or FollowOptions()
    stop = stop or StopFlag()
    report = FollowReport(source=source.name)
    started = time.monotonic()
    seen: dict[TopicPartition, int] | None = None
    cut = held = False
    last_end = started
    failures = 0
    upkeep = TableUpkeep(spark, options.keep_snapshots, options.compact_every)
    logger.info("source %s: following (%s)", source.name, options)
    while True:
        if stop.is_set():
            report.stopped_by = stop.reason or STOPPED_BY_SIGNAL
            break
        if options.run_for_s is not None and time.monotonic() - started >= options.run_for_s:
            report.stopped_by = STOPPED_BY_TIME
            break
        if options.max_batches is not None and report.batches >= options.max_batches:
            report.stopped_by = STOPPED_BY_BATCHES
            break
        try:
            _, latest = records.watermarks()
            failures = 0
        except RecordSourceError as exc:
            failures += 1
            if failures >= MAX_WATERMARK_FAILURES:
                raise
            wait = min(60.0, options.poll_s * 2**failures)
            logger.warning("source %s: %s; trying again in %.0f s", source.name, exc, wait)
            stop.wait(wait)
            continue
        since_last = time.monotonic() - last_end
        if not batch_due(latest, seen, cut=cut, held=held, since_last_s=since_last, hold_retry_s=options.hold_retry_s):
            stop.wait(options.poll_s)
            continue
        try:
            with source_lock(catalog, source.name, wait_s=options.lock_wait_s):
                result = run_batch(spark, source, records, options.max_records)
                upkept = time.monotonic()
                upkeep.after(result)
                result.phases["upkeep"] = time.monotonic() - upkept
        except SourceBusyError as exc:
            report.busy += 1
            logger.warning("source %s: %s; trying again in %.0f s", source.name, exc, options.poll_s)
            stop.wait(options.poll_s)
            continue
        seen, last_end = dict(latest), time.monotonic()
        # cut by the cap (a cut at one timestamp may read fewer records than the cap): more records wait
        cut = (
            options.max_records is not None
            and (result.capped or result.records >= options.max_records)
            and not result.held_everything
        )
        held = _held(result)
        report.add(result)
        if on_batch is not None:
            on_batch(result)
    report.seconds = time.monotonic() - started
    logger.info(
        "source %s: follower stopped (%s) after %d batch(es), %d record(s)",
        source.name,
        report.stopped_by,
        report.batches,
        report.records,
    )
    return report
