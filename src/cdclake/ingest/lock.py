"""One ingestion of a source at a time: a lease in the lake (``lake.cdc_audit.locks``).

Whatever runs a batch of a source (``cdc_ingest__<source>``, ``cdc_snapshot``'s verify step, ``cdclake ingest``
or ``replay``) and whatever maintains its tables (``iceberg_maintenance``) first takes the source's lock, so
a second run never redoes the first one's in-flight batch (to the ledger, a PLANNED batch without its
COMMITTED row looks interrupted) and maintenance never rewrites a table a batch is writing.

The lock is a row appended to ``cdc_audit.locks`` through pyiceberg, in a commit that only succeeds when the
table is still as it was when the lock was seen free (Iceberg's optimistic concurrency: the catalog swaps the
table's metadata only if nobody committed in between). The row names its holder (host, pid and the process's
start time) and a lease that a background thread renews. A lock is held until it is released, or until its
holder is gone: on the same host a dead holder is seen at once (a crashed batch's rerun does not wait); from
another host, when its lease ran out.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdclake.exceptions import SourceBusyError
from cdclake.lake import rows as lake_rows
from cdclake.lake.catalog import AUDIT_NAMESPACE
from cdclake.settings import Settings, settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

logger = logging.getLogger(__name__)

LOCKS = "locks"
ACQUIRED, RENEWED, RELEASED = "acquired", "renewed", "released"
#: How long a holder's lock lasts without renewal; renewed every third of it.
DEFAULT_LEASE_S = 120.0
#: How long a run waits for the holder to finish before it gives up (``--lock-wait``).
DEFAULT_WAIT_S = 300.0
_POLL_S = 2.0
#: A release deletes the rows of the source's earlier locks once an acquire read this many (:meth:`SourceLock._tidy`):
#: every acquire reads all of them, one file each (about 1.5 ms per row), and a follower adds two or more per batch
#: (``benchmarks/bench_lock.py``, docs/benchmarks.md).
TIDY_AFTER_ROWS = 32
#: ``commit.retry.num-retries=0``: pyiceberg would otherwise re-apply a lock's append on top of a concurrent
#: commit, and two runs would each take the lock.
_PROPERTIES = {"format-version": "2", "comment": "cdclake source locks", "commit.retry.num-retries": "0"}


@dataclass(frozen=True)
class Owner:
    """Who holds a lock: enough to tell, on its host, whether that process still lives."""

    host: str
    boot_id: str
    pid: int
    started: int | None
    label: str = ""

    @classmethod
    def this_process(cls, label: str = "") -> Owner:
        """The running process (``label``: what it is, e.g. ``airflow cdc_ingest__postgres/<run id>``)."""
        return cls(socket.gethostname(), _boot_id(), os.getpid(), _start_ticks(os.getpid()), label)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Owner:
        try:
            data = json.loads(text or "{}")
            return cls(
                str(data["host"]), str(data["boot_id"]), int(data["pid"]), data.get("started"), data.get("label", "")
            )
        except (ValueError, KeyError, TypeError):
            return cls("?", "?", -1, None, str(text))

    def alive(self) -> bool | None:
        """True/False when this host can tell (the same host and boot), None otherwise."""
        if self.host != socket.gethostname() or self.boot_id != _boot_id():
            return None
        return _start_ticks(self.pid) == self.started and self.started is not None

    def describe(self) -> str:
        who = f"pid {self.pid} on {self.host}"
        return f"{self.label} ({who})" if self.label else who


@dataclass(frozen=True)
class Holder:
    """The current holder of a source's lock."""

    lock_id: str
    owner: Owner
    since: datetime
    expires_at: datetime


def current_holder(
    rows: Sequence[Mapping[str, Any]], now: datetime, alive: Callable[[Owner], bool | None]
) -> Holder | None:
    """Who holds the lock, from the source's rows of ``cdc_audit.locks`` (pure).

    A lock is held from its ``acquired`` row until its ``released`` row, while its holder lives: a holder that
    ``alive`` says is gone holds nothing; one it cannot judge (another host) holds until its last lease ends.
    """
    locks: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["at"]):
        entry = locks.setdefault(row["lock_id"], {"owner": row["owner"], "since": row["at"]})
        entry["event"] = row["event"] if entry.get("event") != RELEASED else RELEASED
        entry["expires_at"] = row["expires_at"] or entry.get("expires_at")
    held = []
    for lock_id, entry in locks.items():
        if entry["event"] == RELEASED:
            continue
        owner = Owner.from_json(entry["owner"])
        verdict = alive(owner)
        if verdict is False or (verdict is None and entry["expires_at"] <= now):
            continue
        held.append(Holder(lock_id, owner, entry["since"], entry["expires_at"]))
    return max(held, key=lambda h: h.since, default=None)


class SourceLock:
    """The lock of one source (see the module docstring); use :func:`source_lock`.

    Args:
        catalog: a pyiceberg catalog of the lake.
        source: the source's name.
        owner: who takes it.
        lease_s: the lease; renewed every third of it while held.
        tidy_after_rows: a release deletes the source's earlier locks' rows once its acquire read this many
            (:meth:`_tidy`).
    """

    def __init__(
        self,
        catalog: Catalog,
        source: str,
        owner: Owner,
        lease_s: float = DEFAULT_LEASE_S,
        tidy_after_rows: int = TIDY_AFTER_ROWS,
    ) -> None:
        self.catalog = catalog
        self.source = source
        self.owner = owner
        self.lease_s = lease_s
        self.tidy_after_rows = tidy_after_rows
        self.lock_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._acquired_at: datetime | None = None
        self._rows_seen = 0
        self._ensured = False

    def acquire(self, wait_s: float = DEFAULT_WAIT_S, on_wait: Callable[[Holder], None] | None = None) -> None:
        """Take the lock, waiting up to ``wait_s`` for its holder to release it.

        Raises:
            SourceBusyError: when it is still held after ``wait_s``, naming the holder.
        """
        from pyiceberg.exceptions import CommitFailedException

        deadline = time.monotonic() + wait_s
        reported: str | None = None
        while True:
            table = self._table()
            rows = self._rows(table)
            holder = current_holder(rows, datetime.now(UTC), lambda o: o.alive())
            if holder is None:
                try:
                    # commits only if nobody committed to the table since it was read (Iceberg's ref assertion)
                    self._acquired_at = self._append(table, ACQUIRED)
                except CommitFailedException:
                    continue  # someone else committed first: look again
                self._rows_seen = len(rows)
                self._renewer = threading.Thread(target=self._renew, name=f"cdclake-lock-{self.source}", daemon=True)
                self._renewer.start()
                logger.info("source %s: lock %s taken by %s", self.source, self.lock_id, self.owner.describe())
                return
            if time.monotonic() >= deadline:
                raise SourceBusyError(
                    f"source {self.source} is being ingested by {holder.owner.describe()} since "
                    f"{holder.since:%Y-%m-%d %H:%M:%S} UTC (lock {holder.lock_id}, lease until "
                    f"{holder.expires_at:%H:%M:%S} UTC); this run did nothing. Wait for it to finish, or raise the "
                    "wait (--lock-wait)"
                )
            if holder.lock_id != reported:
                reported = holder.lock_id
                if on_wait is not None:
                    on_wait(holder)
                logger.warning(
                    "source %s: waiting for %s (holding its lock since %s)",
                    self.source,
                    holder.owner.describe(),
                    holder.since,
                )
            time.sleep(_POLL_S)

    def release(self) -> None:
        """Give the lock back (stops the renewals), then keep the table small (:meth:`_tidy`)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=30)
        self._commit(RELEASED)
        logger.info("source %s: lock %s released", self.source, self.lock_id)
        self._tidy()

    def _tidy(self) -> None:
        """Keep the table small: a follower takes and releases the lock for every batch.

        When its acquire read ``tidy_after_rows`` (:data:`TIDY_AFTER_ROWS`) rows of the source or more, delete the
        rows older than its own ``acquired`` row: those of locks that were over when it took the lock (released, or
        their holder gone), which no holder needs. The source keeps its last lock's rows. Then, once the table has
        more than :data:`cdclake.lake.rows.TIDY_AFTER_SNAPSHOTS` snapshots, expire all but the newest
        (:func:`cdclake.lake.rows.tidy_snapshots`): each commit costs more the more snapshots the table has.

        The table is the lock module's own: Spark's maintenance procedures would commit to it with retries, which
        its commits must not have; ``iceberg_maintenance`` only removes its orphan files. A commit that loses a
        race is left for the next release.
        """
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.expressions import And, EqualTo, LessThan

        table = self._table()
        if self._acquired_at is not None and self._rows_seen >= self.tidy_after_rows:
            try:
                # the commit updates ``table`` in place: the snapshot tidy-up below sees the delete's snapshot
                with lake_rows.transaction(table) as tx:
                    tx.delete(And(EqualTo("source", self.source), LessThan("at", self._acquired_at.isoformat())))
            except CommitFailedException:
                logger.info("source %s: lock table tidy-up left for later (concurrent commit)", self.source)
                return
        lake_rows.tidy_snapshots(table)

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self._commit(RENEWED)
            except Exception:  # noqa: BLE001 - a missed renewal only shortens the lease; the next one retries
                logger.warning("source %s: lock %s not renewed", self.source, self.lock_id, exc_info=True)

    def _commit(self, event: str) -> None:
        """Append an event of our lock, retried on a concurrent commit (other sources' locks)."""
        from pyiceberg.exceptions import CommitFailedException

        for attempt in range(10):
            try:
                self._append(self._table(), event)
                return
            except CommitFailedException:
                time.sleep(min(0.05 * 2**attempt, 1.0))
        self._append(self._table(), event)

    def _table(self) -> Any:
        """The table as committed now; the first call of this lock creates it, or sets its properties, if needed."""
        if self._ensured:
            return self.catalog.load_table((AUDIT_NAMESPACE, LOCKS))
        lake_rows.ensure_namespace(self.catalog, (AUDIT_NAMESPACE,))
        table = self.catalog.create_table_if_not_exists(
            (AUDIT_NAMESPACE, LOCKS), schema=locks_schema(), properties=_PROPERTIES
        )
        if any(table.properties.get(k) != v for k, v in _PROPERTIES.items()):
            with table.transaction() as tx:
                tx.set_properties(_PROPERTIES)
            table = self.catalog.load_table((AUDIT_NAMESPACE, LOCKS))
        self._ensured = True
        return table

    def _rows(self, table: Any) -> list[dict[str, Any]]:
        from pyiceberg.expressions import EqualTo

        return list(table.scan(row_filter=EqualTo("source", self.source)).to_arrow().to_pylist())

    def _append(self, table: Any, event: str) -> datetime:
        """Append an event of our lock; returns its time (the row's ``at``)."""
        import pyarrow as pa

        now = datetime.now(UTC)
        row = {
            "source": self.source,
            "lock_id": self.lock_id,
            "event": event,
            "owner": self.owner.to_json(),
            "at": now,
            "expires_at": now + timedelta(seconds=self.lease_s),
        }
        with lake_rows.transaction(table) as tx:
            tx.append(
                pa.Table.from_pylist([row], schema=locks_schema()), snapshot_properties={"cdc.lock": self.lock_id}
            )
        return now


def locks_schema() -> pa.Schema:
    """The columns of ``cdc_audit.locks``: one row per event of a lock."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("source", pa.string(), nullable=False),
            pa.field("lock_id", pa.string(), nullable=False),
            pa.field("event", pa.string(), nullable=False),
            pa.field("owner", pa.string()),
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("expires_at", pa.timestamp("us", tz="UTC")),
        ]
    )


@contextmanager
def source_lock(
    catalog: Catalog,
    source: str,
    *,
    wait_s: float = DEFAULT_WAIT_S,
    label: str = "",
    on_wait: Callable[[Holder], None] | None = None,
) -> Iterator[SourceLock]:
    """Hold ``source``'s lock for the block.

    Raises:
        SourceBusyError: when another run holds it for longer than ``wait_s``.
    """
    lock = SourceLock(catalog, source, Owner.this_process(label or settings().lock_label))
    lock.acquire(wait_s, on_wait)
    try:
        yield lock
    finally:
        lock.release()


#: What the lock's holder is, shown to a run that waits for it (the Airflow operator sets it to the task run).
LOCK_LABEL_ENV = Settings.env_name("lock_label")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"


def _start_ticks(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
