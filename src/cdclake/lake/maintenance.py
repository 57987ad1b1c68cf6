"""Iceberg table maintenance through Iceberg's Spark procedures, driven by a per-table policy.

The pure part builds the ``CALL lake.system.<procedure>(...)`` statements from a
:class:`MaintenancePolicy`; :func:`run_calls` runs them, :func:`run_table` one table's into a job's summary.
:func:`compact_recent_files` and :func:`keep_newest_snapshots` are a follower's upkeep between its batches
(:class:`cdclake.ingest.follow.TableUpkeep`).

Order per table (each step optional):

1. ``rewrite_data_files``: compact small data files (binpack), so MERGE batches do not leave
   thousands of tiny files; on tables that delete, the position deletes that only applied to the rewritten
   files go with them (``remove-dangling-deletes``).
2. ``rewrite_position_delete_files``: compact the position deletes that merge-on-read MERGEs write
   (skipped for ``append`` tables, which never delete).
3. ``expire_snapshots``: drop snapshots older than N days, always keeping the last K.
4. ``remove_orphan_files``: delete files no snapshot references that are older than N days (the
   age guard keeps files of writes still in flight).

The lake's audit tables (``lake.cdc_audit.*``: the batch ledger, transactions, schema changes, dead letters,
quarantine) take two to four commits per batch, each writing a small file and a snapshot: without
maintenance, every commit rewrites a longer snapshot list and every read of the ledger opens more files.
They get :func:`audit_policy` (append-only: no position deletes, no tombstones).

Upsert tables also have a side table of delete tombstones (``<table>__cdc_deletes``, see
:mod:`cdclake.lake.names`): :func:`tombstone_calls` deletes the tombstones recorded (``_cdc_deleted_at``,
the ingest time of the delete) more than ``tombstone_retention_days`` ago, counting them first; the side
table then gets the same procedures as its table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cdclake.connectors import LakeMode, LakeOptions
from cdclake.connectors.spec import TOMBSTONE_RETENTION_DAYS_DEFAULT
from cdclake.exceptions import ConfigError, SparkDriverError
from cdclake.gateway import jvm_class
from cdclake.lake.catalog import CATALOG_NAME
from cdclake.lake.commits import sql_committing
from cdclake.lake.names import AUDIT_NAMESPACE, catalog_identifier, tombstone_identifier
from cdclake.sql import quote_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

EXPIRE_OLDER_THAN_DAYS_DEFAULT = 7.0
RETAIN_LAST_DEFAULT = 5
REWRITE_MIN_INPUT_FILES_DEFAULT = 5
#: A follower's compaction rewrites only data files under this size (:func:`compact_recent_files`).
RECENT_FILE_BYTES = 1024 * 1024
ORPHAN_OLDER_THAN_DAYS_DEFAULT = 3.0
#: Snapshot-summary property of a maintenance commit that removes rows and adds none: the tombstones' expiry, a
#: ``DELETE`` that commits an ``overwrite`` when it rewrites a file keeping some of its rows (the side table deletes
#: copy-on-write). A table's position ceiling is found past it (:func:`cdclake.ingest.tables.position_ceiling`).
REMOVES_ROWS_ONLY = "cdc.removes-rows-only"
#: ``cdc_audit.locks`` (:data:`cdclake.ingest.lock.LOCKS`).
LOCKS_TABLE = "locks"


@dataclass(frozen=True)
class MaintenancePolicy:
    """What maintenance one table gets.

    Attributes:
        expire_snapshots: run ``expire_snapshots``.
        expire_older_than_days: expire snapshots older than this many days ...
        retain_last: ... but always keep at least this many.
        rewrite_data_files: run ``rewrite_data_files`` (binpack).
        rewrite_min_input_files: only rewrite a file group with at least this many files.
        target_file_size_bytes: target size of rewritten files (None: the table's
            ``write.target-file-size-bytes``).
        rewrite_below_bytes: only rewrite data files under this size (None: Iceberg's binpack default, 75% of
            the target size).
        rewrite_position_deletes: run ``rewrite_position_delete_files``.
        remove_orphan_files: run ``remove_orphan_files``.
        orphan_older_than_days: only remove orphans older than this many days (at least 1: Iceberg's
            procedure refuses shorter intervals).
        expire_tombstones: delete old delete tombstones (upsert tables; off when the spec's
            ``tombstone_retention_days`` is null).
        tombstone_retention_days: delete tombstones recorded more than this many days ago.
        dry_run: ``remove_orphan_files`` only lists what it would delete and expired tombstones are
            only counted (the job also skips the other procedures, which have no dry-run mode).
    """

    expire_snapshots: bool = True
    expire_older_than_days: float = EXPIRE_OLDER_THAN_DAYS_DEFAULT
    retain_last: int = RETAIN_LAST_DEFAULT
    rewrite_data_files: bool = True
    rewrite_min_input_files: int = REWRITE_MIN_INPUT_FILES_DEFAULT
    target_file_size_bytes: int | None = None
    rewrite_below_bytes: int | None = None
    rewrite_position_deletes: bool = True
    remove_orphan_files: bool = True
    orphan_older_than_days: float = ORPHAN_OLDER_THAN_DAYS_DEFAULT
    expire_tombstones: bool = True
    tombstone_retention_days: float = TOMBSTONE_RETENTION_DAYS_DEFAULT
    dry_run: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.expire_older_than_days < 0:
            problems.append("expire_older_than_days must be >= 0")
        if self.retain_last < 1:
            problems.append("retain_last must be >= 1")
        if self.rewrite_min_input_files < 1:
            problems.append("rewrite_min_input_files must be >= 1")
        if self.target_file_size_bytes is not None and self.target_file_size_bytes <= 0:
            problems.append("target_file_size_bytes must be positive")
        if self.rewrite_below_bytes is not None and self.rewrite_below_bytes <= 0:
            problems.append("rewrite_below_bytes must be positive")
        if self.orphan_older_than_days < 1:
            # Iceberg's procedure refuses intervals under 24 hours (files of in-flight writes look orphaned).
            problems.append("orphan_older_than_days must be >= 1 (Iceberg refuses intervals under 24 hours)")
        if self.tombstone_retention_days < 0:
            problems.append("tombstone_retention_days must be >= 0")
        if problems:
            raise ConfigError("maintenance policy: " + "; ".join(problems))


_POLICY_KEYS = {f.name for f in fields(MaintenancePolicy)}


def policy_for(lake: LakeOptions | None = None, overrides: Mapping[str, Any] | None = None) -> MaintenancePolicy:
    """The policy of one table: defaults, adjusted to the table's lake options, then explicit overrides.

    ``append`` tables never delete, so position-delete compaction is off for them; only ``upsert``
    tables have tombstones, kept for the spec's ``tombstone_retention_days`` (null: forever).

    Args:
        lake: the table's ``lake`` options from its connector spec.
        overrides: policy fields to set (e.g. from DAG params); None values are ignored.

    Raises:
        ConfigError: on an unknown key or an invalid value (names the key).
    """
    policy = MaintenancePolicy()
    if lake is not None and lake.mode is LakeMode.APPEND:
        policy = replace(policy, rewrite_position_deletes=False)
    if lake is not None:
        if lake.mode is not LakeMode.UPSERT or lake.tombstone_retention_days is None:
            policy = replace(policy, expire_tombstones=False)
        else:
            policy = replace(policy, tombstone_retention_days=lake.tombstone_retention_days)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    unknown = sorted(set(given) - _POLICY_KEYS)
    if unknown:
        raise ConfigError(
            f"maintenance policy: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_POLICY_KEYS))}"
        )
    return replace(policy, **given)


def audit_policy(overrides: Mapping[str, Any] | None = None) -> MaintenancePolicy:
    """The policy of the lake's audit tables: that of an ``append`` table (no position deletes, no tombstones).

    Expiring their old snapshots is safe for exactly-once: only the redo of the latest, interrupted batch
    looks for its own audit commits, and those are the newest snapshots (``retain_last`` keeps them).

    Raises:
        ConfigError: on an unknown key or an invalid value (names the key).
    """
    return policy_for(LakeOptions(mode=LakeMode.APPEND), overrides)


def audit_policy_of(identifier: str, overrides: Mapping[str, Any] | None = None) -> MaintenancePolicy:
    """The policy of one audit table: :func:`audit_policy`, except for ``cdc_audit.locks``.

    The source locks (:mod:`cdclake.ingest.lock`) commit without retries, so that two runs never both take a lock;
    a Spark procedure committing to that table could fail any time a lock is taken. The lock module tidies the
    table itself (old rows, old snapshots); maintenance only removes the files that tidy-up leaves orphaned.

    Raises:
        ConfigError: on an unknown key or an invalid value (names the key).
    """
    policy = audit_policy(overrides)
    if identifier.rsplit(".", 1)[-1] == LOCKS_TABLE:
        policy = replace(policy, expire_snapshots=False, rewrite_data_files=False, rewrite_position_deletes=False)
    return policy


def audit_identifiers(spark: SparkSession, catalog: str = CATALOG_NAME) -> list[str]:
    """``<catalog>.cdc_audit.<name>`` of every audit table the lake has (none before its first batch)."""
    if not spark.catalog.databaseExists(f"{catalog}.{AUDIT_NAMESPACE}"):
        return []
    rows = spark.sql(f"SHOW TABLES IN {catalog}.{AUDIT_NAMESPACE}").collect()
    return sorted(f"{catalog}.{AUDIT_NAMESPACE}.{row['tableName']}" for row in rows)


@dataclass(frozen=True)
class MaintenanceCall:
    """One procedure call on one table; ``properties`` go into the snapshot summary of each commit it makes (a
    statement with them returns no rows: :func:`~cdclake.lake.commits.sql_committing`)."""

    procedure: str
    table: str
    sql: str
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _timestamp(moment: datetime) -> str:
    utc = moment.astimezone(UTC) if moment.tzinfo else moment
    return f"TIMESTAMP '{utc.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _options(values: Mapping[str, Any]) -> str:
    pairs = ", ".join(f"{_literal(k)}, {_literal(str(v))}" for k, v in values.items())
    return f"map({pairs})"


def maintenance_calls(
    identifier: str,
    policy: MaintenancePolicy,
    now: datetime,
    catalog: str = CATALOG_NAME,
    *,
    prefix_listing: bool = False,
) -> list[MaintenanceCall]:
    """The ``CALL <catalog>.system.*`` statements of a policy for one table, in execution order (pure).

    Timestamps are rendered in UTC; cdclake sessions run with ``spark.sql.session.timeZone=UTC``.

    Args:
        identifier: ``lake.<prefix>.<schema>.<table>`` or the same without the catalog.
        policy: the table's policy.
        now: the reference time for the age thresholds.
        catalog: the Spark catalog holding the table.
        prefix_listing: ``remove_orphan_files`` lists the table's files through its FileIO (``prefix_listing``),
            not through Hadoop's file systems, which know no ``s3://`` location: for a lake on object storage.
    """
    table = catalog_identifier(identifier)
    listing = ", prefix_listing => true" if prefix_listing else ""
    # with its catalog: a name without one makes Iceberg try its first part as a catalog, and log a warning with
    # a stack trace for every call
    name = _literal(f"{catalog}.{table}")
    system = f"{catalog}.system"
    calls: list[MaintenanceCall] = []
    if policy.dry_run:
        if policy.remove_orphan_files:
            older = _timestamp(now - timedelta(days=policy.orphan_older_than_days))
            calls.append(
                MaintenanceCall(
                    "remove_orphan_files",
                    table,
                    f"CALL {system}.remove_orphan_files(table => {name}, older_than => {older}, dry_run => true{listing})",
                )
            )
        return calls
    if policy.rewrite_data_files:
        options: dict[str, Any] = {"min-input-files": policy.rewrite_min_input_files}
        if policy.target_file_size_bytes:
            options["target-file-size-bytes"] = policy.target_file_size_bytes
        if policy.rewrite_below_bytes:
            options["min-file-size-bytes"] = policy.rewrite_below_bytes
        if policy.rewrite_position_deletes:
            options["remove-dangling-deletes"] = "true"
        calls.append(
            MaintenanceCall(
                "rewrite_data_files",
                table,
                f"CALL {system}.rewrite_data_files(table => {name}, strategy => 'binpack', "
                f"options => {_options(options)})",
            )
        )
    if policy.rewrite_position_deletes:
        options = {"min-input-files": policy.rewrite_min_input_files}
        calls.append(
            MaintenanceCall(
                "rewrite_position_delete_files",
                table,
                f"CALL {system}.rewrite_position_delete_files(table => {name}, options => {_options(options)})",
            )
        )
    if policy.expire_snapshots:
        older = _timestamp(now - timedelta(days=policy.expire_older_than_days))
        calls.append(
            MaintenanceCall(
                "expire_snapshots",
                table,
                f"CALL {system}.expire_snapshots(table => {name}, older_than => {older}, "
                f"retain_last => {int(policy.retain_last)})",
            )
        )
    if policy.remove_orphan_files:
        older = _timestamp(now - timedelta(days=policy.orphan_older_than_days))
        calls.append(
            MaintenanceCall(
                "remove_orphan_files",
                table,
                f"CALL {system}.remove_orphan_files(table => {name}, older_than => {older}{listing})",
            )
        )
    return calls


def tombstone_calls(
    identifier: str,
    policy: MaintenancePolicy,
    now: datetime,
    catalog: str = CATALOG_NAME,
) -> list[MaintenanceCall]:
    """Statements that expire the delete tombstones of one upsert table (pure).

    ``count_expired_tombstones`` counts the tombstones recorded before ``now`` minus the retention
    (``_cdc_deleted_at``, their ingest time); ``expire_tombstones`` deletes them (not in a dry run).

    Args:
        identifier: the upsert table (not its side table), with or without the catalog.
        policy: the table's policy.
        now: the reference time for the retention.
        catalog: the Spark catalog holding the table.
    """
    if not policy.expire_tombstones:
        return []
    side = catalog_identifier(tombstone_identifier(identifier))
    name = f"{catalog}.{quote_name(side.split('.'))}"
    expired = f"_cdc_deleted_at < {_timestamp(now - timedelta(days=policy.tombstone_retention_days))}"
    calls = [
        MaintenanceCall("count_expired_tombstones", side, f"SELECT count(*) AS expired FROM {name} WHERE {expired}")
    ]
    if not policy.dry_run:
        delete = f"DELETE FROM {name} WHERE {expired}"
        calls.append(MaintenanceCall("expire_tombstones", side, delete, {REMOVES_ROWS_ONLY: "true"}))
    return calls


def run_calls(
    spark: SparkSession, calls: list[MaintenanceCall], *, log_level: int = logging.INFO
) -> dict[str, list[dict[str, Any]]]:
    """Run the calls in order and return each procedure's output rows (as dicts), keyed by procedure. Each call
    and its output is logged at ``log_level`` (a caller that logs its own summary passes ``logging.DEBUG``).

    Raises:
        pyspark.errors.PySparkException: the first failing procedure's error (the later calls of
            the same table are not run).
    """
    results: dict[str, list[dict[str, Any]]] = {}
    for call in calls:
        logger.log(log_level, "maintenance %s on %s: %s", call.procedure, call.table, call.sql)
        if call.properties:  # a statement that changes rows (a DELETE): it returns none
            sql_committing(spark, call.sql, call.properties)
            rows = []
        else:
            rows = spark.sql(call.sql).collect()
        results[call.procedure] = [_jsonable(row.asDict(recursive=True)) for row in rows]
        logger.log(log_level, "maintenance %s on %s -> %s", call.procedure, call.table, results[call.procedure])
    return results


def run_table(
    spark: SparkSession,
    name: str,
    calls: list[MaintenanceCall],
    summary: dict[str, Any],
    *,
    driver_lost: Callable[[BaseException], str | None],
    heap_advice: str,
) -> None:
    """Run the ``calls`` of table ``name`` into a maintenance job's ``summary``: the procedures' rows under
    ``summary["tables"][name]``, or the first line of the error under ``summary["failed"][name]``. A table that
    fails does not stop the others. ``driver_lost`` says what happened to the driver when an error was raised
    (``cdclake.spark.driver_failure``), ``heap_advice`` where to give it more heap (``more_heap_advice``).

    Raises:
        SparkDriverError: the Spark driver ran out of memory or exited while maintaining ``name`` (recorded
            under ``failed`` too). No table after it can be maintained by this session.
    """
    try:
        summary["tables"][name] = run_calls(spark, calls)
    except Exception as exc:
        what = driver_lost(exc)
        if what is None:
            logger.error("maintenance of %s failed: %s", name, exc)
            summary["failed"][name] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return
        message = (
            f"maintenance of {name}: the Spark driver {what}; the tables after it were not maintained. Give the "
            f"driver more heap: {heap_advice}; the next run maintains every table again."
        )
        logger.error("%s", message)
        summary["failed"][name] = message
        raise SparkDriverError(message) from exc


#: What a follower's compaction does: the rewrites of the maintenance, on the recent (small) files only.
RECENT_FILES_POLICY = MaintenancePolicy(
    expire_snapshots=False,
    rewrite_below_bytes=RECENT_FILE_BYTES,
    remove_orphan_files=False,
    expire_tombstones=False,
)


def compact_recent_files(
    spark: SparkSession, identifier: str, *, deletes: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """Compact table ``identifier`` (``lake.ns.table``): in each partition with :data:`REWRITE_MIN_INPUT_FILES_DEFAULT`
    or more data files under :data:`RECENT_FILE_BYTES`, those files are rewritten as one, with the position
    deletes that applied to them; then, when the table ``deletes`` (not an ``append`` table), each partition's
    position-delete files are compacted, which drops those that only applied to rewritten files. Returns each
    procedure's output rows ({} when the table does not exist); the calls are logged at DEBUG.

    The size bound keeps the work of one compaction to what recent batches wrote, however large the table: each
    batch adds a few small files to every partition it touches, and a reader's scan opens all of them (a
    follower's own scans are narrowed to its batch's keys).
    """
    if not spark.catalog.tableExists(identifier):
        return {}
    spark.catalog.refreshTable(identifier)  # the session's cached table misses other writers' commits
    policy = RECENT_FILES_POLICY if deletes else replace(RECENT_FILES_POLICY, rewrite_position_deletes=False)
    return run_calls(spark, maintenance_calls(identifier, policy, datetime.now(UTC)), log_level=logging.DEBUG)


def keep_newest_snapshots(spark: SparkSession, identifier: str, keep: int) -> int:
    """Expire the snapshots of table ``identifier`` (``lake.ns.table``) but the newest ``keep`` of its history
    (branch and tag heads stay), in its metadata only; returns how many it expired (0 when the table does not
    exist or has no more than ``keep``). The files only they referenced are left to ``remove_orphan_files``.

    Through Iceberg's Java library on the session's own catalog, as the table's writes go: one metadata commit of
    tens of milliseconds. pyiceberg's expiry copies the table's metadata for each snapshot (over a minute for a
    data table of 1,000), and the ``expire_snapshots`` procedure reads the manifests of every snapshot to delete
    the files only the expired ones referenced.
    """
    if not spark.catalog.tableExists(identifier):
        return 0
    util = jvm_class(spark, "org.apache.iceberg.spark.Spark3Util")
    table = util.loadIcebergTable(spark._jsparkSession, identifier)
    before = len(table.snapshots())
    if before <= keep:
        return 0
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    table.expireSnapshots().retainLast(keep).expireOlderThan(now_ms).cleanExpiredFiles(False).commit()
    return before - len(table.snapshots())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, str | int | float | bool | type(None)) else str(v) for k, v in row.items()}
