"""Quarantined tables: their held records, release requests and release outcomes.

A table is **quarantined** when a batch cannot apply its events (schema policy ``quarantine``, or an
incompatible change under ``evolve``): the events go, as raw Kafka records, to
``lake.cdc_audit.quarantine`` and the ledger moves past them. Every later batch holds the table's
new events there too, so nothing is applied out of order, until a user releases the table
(``cdclake quarantine release``). That appends a ``requested`` row to
``lake.cdc_audit.quarantine_releases``. The next batch of the source (run even when Kafka has nothing
new) reads the held records again together with its own records, decodes them together (so they get
the batch's latest schema), applies them in position order, and appends the outcome row:

* ``applied``: ``released_batches`` lists the held batches it replayed; their records are held no longer;
* ``failed``: the table stays quarantined (the batch's own events are held too); ``detail`` says why.

Release actions (:class:`ReleaseAction`):

* ``evolve``: the held events are applied to the existing table, with the ``evolve`` policy for that
  batch (new columns added, widenings applied). An incompatible type change must be resolved in the
  Iceberg table first (e.g. rename the old column and add one with the new type);
  :func:`request_release` refuses while the column still has its old type.
* ``recreate``: the table is renamed to ``<table>__cdc_replaced_<batch id>`` (kept for reference; drop
  it when done), its tombstones are dropped, and a new table is created from the events' schema. Rows
  with no event since are only in the renamed table: re-snapshot the source table to refill it.
* ``discard``: the held events are not applied; they are copied to ``lake.cdc_audit.dead_letters``
  (reason ``discarded by release <id>: <why the table was quarantined>``; they also stay in
  ``cdc_audit.quarantine``) and the table takes the batch's own events again with its own schema policy.
  For events that can never be applied (e.g. held records spanning two incompatible schema changes, whose
  ``evolve``/``recreate`` release fails); the table then lacks their changes until a re-snapshot.

The state is computed by a pure function (:func:`quarantine_states`) from small aggregations read
with Spark (the ingestion job, :func:`read_states`) or pyiceberg (the CLI, :func:`catalog_states`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cdclake.exceptions import QuarantineReleaseError
from cdclake.ingest.offsets import OffsetRange, within
from cdclake.ingest.schema import ChangeKind, parse_changes, unresolved_changes
from cdclake.lake import audit
from cdclake.lake.names import AUDIT_NAMESPACE, audit_table, with_catalog
from cdclake.sql import quote_identifier, quote_string

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

QUARANTINE = audit.QUARANTINE.name
RELEASES = audit.RELEASES.name
#: Suffix of the name a ``recreate`` release gives the old table (plus the batch id).
REPLACED_SUFFIX = "__cdc_replaced_"


class ReleaseAction(StrEnum):
    """How a quarantined table is released (see the module docstring)."""

    EVOLVE = "evolve"
    RECREATE = "recreate"
    DISCARD = "discard"


class ReleaseStatus(StrEnum):
    """A row of ``cdc_audit.quarantine_releases``: the user's request, then the batch's outcome."""

    REQUESTED = "requested"
    APPLIED = "applied"
    FAILED = "failed"


@dataclass(frozen=True)
class HeldBatch:
    """The records one batch held for one quarantined table."""

    source: str
    table: str
    batch_id: str
    reason: str
    records: int
    recorded_at: datetime


@dataclass(frozen=True)
class ReleaseRecord:
    """One row of ``cdc_audit.quarantine_releases``."""

    source: str
    table: str
    release_id: str
    action: ReleaseAction
    status: ReleaseStatus
    recorded_at: datetime
    batch_id: str | None = None
    records: int | None = None
    released_batches: tuple[str, ...] = ()
    detail: str | None = None

    def row(self) -> dict[str, Any]:
        """The row as written (without ``recorded_at`` when the writer stamps it)."""
        return {
            "source": self.source,
            "table": self.table,
            "release_id": self.release_id,
            "action": self.action.value,
            "status": self.status.value,
            "batch_id": self.batch_id,
            "records": self.records,
            "released_batches": list(self.released_batches),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class QuarantineState:
    """A quarantined table of a source.

    Attributes:
        source: the source that holds its records.
        table: the lake identifier, ``lake.<prefix>.<schema-or-db>.<table>``.
        reason: why it was quarantined (the first held batch's reason).
        held: the batches whose records are held, oldest first.
        release: the pending release request, if any.
        failure: the last failed release since it was quarantined, if any.
    """

    source: str
    table: str
    reason: str
    held: tuple[HeldBatch, ...]
    release: ReleaseRecord | None = None
    failure: ReleaseRecord | None = None

    @property
    def records(self) -> int:
        return sum(h.records for h in self.held)

    @property
    def batches(self) -> tuple[str, ...]:
        return tuple(h.batch_id for h in self.held)

    @property
    def since(self) -> datetime:
        return self.held[0].recorded_at

    def outcome(
        self, batch_id: str, status: ReleaseStatus, detail: str | None = None, now: datetime | None = None
    ) -> ReleaseRecord:
        """The outcome row of the pending release, written by the batch ``batch_id``."""
        assert self.release is not None
        return ReleaseRecord(
            source=self.source,
            table=self.table,
            release_id=self.release.release_id,
            action=self.release.action,
            status=status,
            recorded_at=now or datetime.now(UTC),
            batch_id=batch_id,
            records=self.records,
            released_batches=self.batches if status is ReleaseStatus.APPLIED else (),
            detail=detail,
        )


def quarantine_states(
    held: Iterable[HeldBatch], releases: Iterable[ReleaseRecord]
) -> dict[tuple[str, str], QuarantineState]:
    """The quarantined tables, keyed by ``(source, table)`` (pure).

    A held batch stops being held when an ``applied`` release lists it. A release request is pending
    when it is newer than every outcome row of its table (a later request replaces an earlier one).
    Timestamps are compared only among rows read the same way (all Spark or all pyiceberg).
    """
    by_table: dict[tuple[str, str], list[ReleaseRecord]] = {}
    for rel in releases:
        by_table.setdefault((rel.source, rel.table), []).append(rel)
    released: dict[tuple[str, str], set[str]] = {
        key: {b for r in rels if r.status is ReleaseStatus.APPLIED for b in r.released_batches}
        for key, rels in by_table.items()
    }
    held_by: dict[tuple[str, str], list[HeldBatch]] = {}
    for h in held:
        key = (h.source, h.table)
        if h.batch_id not in released.get(key, set()):
            held_by.setdefault(key, []).append(h)
    states: dict[tuple[str, str], QuarantineState] = {}
    for key, batches in sorted(held_by.items()):
        batches.sort(key=lambda h: (h.recorded_at, h.batch_id))
        rels = sorted(by_table.get(key, []), key=lambda r: r.recorded_at)
        outcomes = [r for r in rels if r.status is not ReleaseStatus.REQUESTED]
        last_outcome = outcomes[-1].recorded_at if outcomes else None
        pending = [
            r
            for r in rels
            if r.status is ReleaseStatus.REQUESTED and (last_outcome is None or r.recorded_at > last_outcome)
        ]
        last_applied = max((r.recorded_at for r in outcomes if r.status is ReleaseStatus.APPLIED), default=None)
        failures = [
            r
            for r in outcomes
            if r.status is ReleaseStatus.FAILED and (last_applied is None or r.recorded_at > last_applied)
        ]
        states[key] = QuarantineState(
            source=key[0],
            table=key[1],
            reason=batches[0].reason,
            held=tuple(batches),
            release=pending[-1] if pending else None,
            failure=failures[-1] if failures else None,
        )
    return states


def find_state(
    states: Mapping[tuple[str, str], QuarantineState], table: str, source: str | None = None
) -> QuarantineState:
    """The state of ``table`` (with or without ``lake.``), optionally of one source (pure).

    Raises:
        QuarantineReleaseError: when the table is not quarantined, or is held for several sources
            and ``source`` is not given.
    """
    identifier = with_catalog(table)
    found = [s for (src, t), s in states.items() if t == identifier and (source is None or src == source)]
    if not found:
        quarantined = ", ".join(sorted({t for _, t in states})) or "none"
        raise QuarantineReleaseError(
            f"{identifier} is not quarantined"
            + (f" for source {source}" if source else "")
            + f" (quarantined tables: {quarantined}); `cdclake quarantine list` shows them"
        )
    if len(found) > 1:
        raise QuarantineReleaseError(
            f"{identifier} is quarantined for sources {', '.join(sorted(s.source for s in found))}; "
            "pass --source to release one"
        )
    return found[0]


def check_release(state: QuarantineState, action: ReleaseAction, lake_types: Mapping[str, str] | None) -> None:
    """Refuse an ``evolve`` release that is bound to fail again (pure).

    Args:
        state: the table's state.
        action: the requested action.
        lake_types: the lake table's column types now (Spark SQL spelling), or None when it does not exist.

    Raises:
        QuarantineReleaseError: for ``evolve`` when the table no longer exists, or when a column of an
            incompatible change still has its old type; the message says how to fix it.
    """
    if action is not ReleaseAction.EVOLVE:
        return
    table = state.table
    if lake_types is None:
        raise QuarantineReleaseError(
            f"{table} does not exist in the lake, so there is nothing to evolve; "
            f"release it with --action {ReleaseAction.RECREATE.value}"
        )
    stuck = unresolved_changes(parse_changes(state.reason), lake_types)
    if stuck:
        columns = "; ".join(
            f"column {c.column} is still {c.old_type}, the held events carry {c.new_type}" for c in stuck
        )
        c = stuck[0]
        raise QuarantineReleaseError(
            f"{table}: {columns}. Change the Iceberg table first, e.g. in Spark SQL: "
            f"ALTER TABLE {table} RENAME COLUMN {quote_identifier(c.column)} TO {quote_identifier(c.column + '_old')}; "
            f"ALTER TABLE {table} ADD COLUMN {quote_identifier(c.column)} {c.new_type}; then release again. "
            f"Or rebuild the table from its events and a re-snapshot: "
            f"cdclake quarantine release {table} --action {ReleaseAction.RECREATE.value}"
        )


def release_hint(state: QuarantineState) -> str:
    """How to get a table whose release failed out of quarantine."""
    kinds = {c.kind for c in parse_changes(state.reason)}
    if ChangeKind.INCOMPATIBLE in kinds:
        return (
            f"alter the Iceberg column(s) of {state.table} by hand and release with --action evolve again, "
            f"or release with --action {ReleaseAction.RECREATE.value}"
        )
    return f"release {state.table} with --action {ReleaseAction.RECREATE.value}"


# -- Spark (the ingestion job) ---------------------------------------------------------------------------------


def _exists(spark: SparkSession, name: str) -> bool:
    return bool(spark.catalog.tableExists(name.replace("`", "")))


def read_states(spark: SparkSession, source: str) -> dict[str, QuarantineState]:
    """The quarantined tables of ``source``, keyed by lake identifier (two small queries; none when
    nothing was ever quarantined)."""
    held_table, releases_table = audit_table(QUARANTINE), audit_table(RELEASES)
    if not _exists(spark, held_table):
        return {}
    held = [
        HeldBatch(r["source"], r["table"], r["batch_id"], r["reason"], int(r["records"]), r["recorded_at"])
        for r in spark.sql(
            f"SELECT source, `table`, batch_id, min(reason) AS reason, count(*) AS records, "
            f"max(recorded_at) AS recorded_at FROM {held_table} WHERE source = {quote_string(source)} "
            "GROUP BY source, `table`, batch_id"
        ).collect()
    ]
    if not held:
        return {}
    releases: list[ReleaseRecord] = []
    if _exists(spark, releases_table):
        spark.sql(f"REFRESH TABLE {releases_table}")  # requests come from pyiceberg (the CLI)
        releases = [
            _release(r.asDict())
            for r in spark.table(releases_table).where(f"source = {quote_string(source)}").collect()
        ]
    return {table: state for (_, table), state in quarantine_states(held, releases).items()}


def _release(row: Mapping[str, Any]) -> ReleaseRecord:
    return ReleaseRecord(
        source=row["source"],
        table=row["table"],
        release_id=row["release_id"],
        action=ReleaseAction(row["action"]),
        status=ReleaseStatus(row["status"]),
        recorded_at=row["recorded_at"],
        batch_id=row.get("batch_id"),
        records=row.get("records"),
        released_batches=tuple(row.get("released_batches") or ()),
        detail=row.get("detail"),
    )


def held_records(
    spark: SparkSession, source: str, states: Iterable[QuarantineState], ranges: Sequence[OffsetRange]
) -> DataFrame:
    """The held records of ``states`` as Kafka records (:data:`cdclake.decode.records.STRING_RECORD_SCHEMA`),
    once per coordinate, leaving out those inside ``ranges`` (the batch reads them itself)."""
    from pyspark.sql import functions as F

    from cdclake.decode.records import HEADER_TYPE

    table = spark.table(audit_table(QUARANTINE))
    selected = F.lit(False)
    for state in states:
        selected = selected | ((F.col("table") == state.table) & F.col("batch_id").isin(*state.batches))
    present = set(table.columns)
    return (
        table.where((F.col("source") == source) & selected)
        .select(
            "topic",
            "partition",
            "offset",
            (F.col("timestamp") if "timestamp" in present else F.lit(None)).cast("timestamp").alias("timestamp"),
            "key",
            "value",
            (F.col("headers") if "headers" in present else F.lit(None)).cast(HEADER_TYPE).alias("headers"),
        )
        .where(~within(ranges))
        .dropDuplicates(["topic", "partition", "offset"])
    )


def discard_reason(state: QuarantineState) -> str:
    """The dead-letter reason of the records a ``discard`` release drops."""
    assert state.release is not None
    return f"discarded by release {state.release.release_id}: {state.reason}"


def replaced_suffix(batch_id: str) -> str:
    """``__cdc_replaced_<batch id>`` (characters outside ``[A-Za-z0-9_]`` become ``_``)."""
    return REPLACED_SUFFIX + "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in batch_id)


# -- pyiceberg (the CLI) ---------------------------------------------------------------------------------------


def _releases_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("source", pa.string()),
            ("table", pa.string()),
            ("release_id", pa.string()),
            ("action", pa.string()),
            ("status", pa.string()),
            ("batch_id", pa.string()),
            ("records", pa.int64()),
            ("released_batches", pa.list_(pa.string())),
            ("detail", pa.string()),
            ("recorded_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def catalog_states(catalog: Catalog, source: str | None = None) -> dict[tuple[str, str], QuarantineState]:
    """The quarantined tables of the lake (of one source), read with pyiceberg (no Spark)."""
    from pyiceberg.exceptions import NoSuchTableError

    scan_args: dict[str, Any] = {"row_filter": f"source == '{source}'"} if source else {}
    try:
        held_table = catalog.load_table((AUDIT_NAMESPACE, QUARANTINE))
    except NoSuchTableError:
        return {}
    rows = (
        held_table.scan(selected_fields=("source", "table", "batch_id", "reason", "recorded_at"), **scan_args)
        .to_arrow()
        .to_pylist()
    )
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["source"], row["table"], row["batch_id"]), []).append(row)
    held = [
        HeldBatch(s, t, b, min(r["reason"] for r in rs), len(rs), max(r["recorded_at"] for r in rs))
        for (s, t, b), rs in grouped.items()
    ]
    try:
        releases_table = catalog.load_table((AUDIT_NAMESPACE, RELEASES))
    except NoSuchTableError:
        releases: list[ReleaseRecord] = []
    else:
        releases = [_release(r) for r in releases_table.scan(**scan_args).to_arrow().to_pylist()]
    return quarantine_states(held, releases)


def _lake_types(catalog: Catalog, identifier: str) -> dict[str, str] | None:
    """Column types of a lake table in Spark SQL spelling (primitive types only), or None when it does not exist."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.load_table(tuple(identifier.split(".")[1:]))
    except NoSuchTableError:
        return None
    spelled = {
        "string": "STRING",
        "long": "BIGINT",
        "int": "INT",
        "boolean": "BOOLEAN",
        "float": "FLOAT",
        "double": "DOUBLE",
        "date": "DATE",
        "timestamptz": "TIMESTAMP",
        "timestamp": "TIMESTAMP_NTZ",
        "binary": "BINARY",
    }
    out = {}
    for fld in table.schema().fields:
        name = str(fld.field_type)
        out[fld.name] = spelled.get(name, name.replace(" ", "").upper())
    return out


def request_release(
    catalog: Catalog,
    table: str,
    action: ReleaseAction,
    *,
    source: str | None = None,
    note: str | None = None,
    now: datetime | None = None,
) -> tuple[QuarantineState, ReleaseRecord]:
    """Record a release request for the next batch of the table's source (pyiceberg, no Spark).

    Args:
        catalog: the lake's pyiceberg catalog.
        table: the lake table, with or without ``lake.``.
        action: how to release it.
        source: the source, when the table is held for several.
        note: free text kept in the request's ``detail``.
        now: the request time (default: now).

    Returns:
        The table's state before the request, and the request.

    Raises:
        QuarantineReleaseError: see :func:`find_state` and :func:`check_release`.
    """
    states = catalog_states(catalog)
    state = find_state(states, table, source)
    check_release(state, action, _lake_types(catalog, state.table))
    request = ReleaseRecord(
        source=state.source,
        table=state.table,
        release_id=uuid.uuid4().hex,
        action=action,
        status=ReleaseStatus.REQUESTED,
        recorded_at=now or datetime.now(UTC),
        records=state.records,
        detail=note,
    )
    import pyarrow as pa

    schema = _releases_arrow_schema()
    releases = catalog.create_table_if_not_exists((AUDIT_NAMESPACE, RELEASES), schema=schema)
    releases.append(pa.Table.from_pylist([request.row() | {"recorded_at": request.recorded_at}], schema=schema))
    logger.info("release of %s (%s) requested: %s", state.table, state.source, action.value)
    return state, request
