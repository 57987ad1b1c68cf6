"""What the cdclake DAGs' ``@task`` functions do, as plain functions (the DAG files stay declarative).

Everything here runs at task run time: connections are looked up here, never at DAG parse time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from cdclake.connect import ConnectorStatus
from cdclake.connectors import ConnectorKind, ConnectorSpec, load_spec, load_specs
from cdclake.databases import open_database
from cdclake.exceptions import ConnectError
from cdclake.ingest.summary import SOURCE_BUSY
from cdclake.lake.audit import DEAD_LETTERS
from cdclake.lake.names import spec_table_identifier
from cdclake.orchestration import (
    SnapshotRequest,
    comparable,
    connector_health_problems,
    count_mismatches,
    failed_connectors,
    lake_row_count,
    load_summary,
    reader_conn_id,
    select_specs,
)
from cdclake_airflow.connections import connection_defined
from cdclake_airflow.hooks.debezium_signal import DebeziumSignalHook
from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook
from cdclake_airflow.plugin import URL_PREFIX

log = logging.getLogger(__name__)

KAFKA_CONN_ID = "kafka_default"


def active_specs(requested: Sequence[str] | None = None) -> list[ConnectorSpec]:
    """The specs to act on: ``requested`` ones, or every spec whose source connection is defined.

    Raises:
        ConnectorSpecError: when a spec file is invalid (every problem, with file and key path).
        ValueError: for an unknown requested spec, or a requested spec without its connection.
    """
    selected, skipped = select_specs(
        list(load_specs().values()), requested, lambda s: connection_defined(s.connection_id)
    )
    for spec in skipped:
        log.info("Skipping spec %s: connection %s is not defined in this deployment", spec.name, spec.connection_id)
    if not selected:
        log.warning("No connector spec has its source connection defined; nothing to do")
    return selected


def validate_connector_specs(requested: Sequence[str] | None, kafka_connect_conn_id: str) -> list[str]:
    """Load and select the specs, and check Connect has each spec's connector plugin.

    Returns:
        The selected spec names (what the upsert task is mapped over).

    Raises:
        ConnectError: when Connect lacks a plugin (names the missing classes and the installed ones).
    """
    specs = active_specs(requested)
    if not specs:
        return []
    installed = {p.class_name for p in KafkaConnectHook(kafka_connect_conn_id).list_plugins()}
    missing = sorted({s.connector_class for s in specs} - installed)
    if missing:
        raise ConnectError(
            f"Kafka Connect has no plugin for {', '.join(missing)}; installed: {', '.join(sorted(installed))}"
        )
    for spec in specs:
        log.info(
            "Spec %s (%s): connector %s, tables %s", spec.name, spec.describe(), spec.connect_name, spec.table_names
        )
    return [spec.name for spec in specs]


#: How long the health check watches a restarted connector, and how long it must stay RUNNING to count as restarted.
RESTART_WAIT_S = 90.0
RESTART_SETTLE_S = 15.0
#: Connect restarts tasks asynchronously: a FAILED status read this soon after the restart, before any other state
#: was seen, may be the old failure
RESTART_STALE_S = 10.0


def check_connectors_health(
    requested: Sequence[str] | None,
    kafka_connect_conn_id: str,
    *,
    restart_wait_s: float = RESTART_WAIT_S,
    settle_s: float = RESTART_SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, str]:
    """Restart the failed tasks of every FAILED connector of an active spec, and fail the run (the alert) when a
    connector was FAILED or is missing, quoting the trace.

    A FAILED connector's failed tasks are restarted (``POST /connectors/<name>/restart?onlyFailed=true``) and
    watched for up to ``restart_wait_s``. FAILED again, the failure is the new trace; RUNNING for ``settle_s``,
    the failure says it was restarted and runs again. The run fails either way: a restart into a lasting fault
    (a capture user that lost a privilege) runs while Debezium retries, up to ``errors_max_retries``, longer
    than any watch. So every run alerts while the cause lasts, the first run after the fix brings the connector
    back (and reports it), and the next one is green. The verdict is not retried (``AirflowFailException``):
    a retry would find the restarted task RUNNING and pass.

    Returns:
        connector -> one-line status, for the XCom (only when no connector was FAILED or missing).

    Raises:
        AirflowFailException: with every failure (the worker's stack traces included); no task retry.
        AirflowSkipException: when no spec has its source connection defined (nothing runs here).
    """
    specs = active_specs(requested)
    if not specs:
        raise AirflowSkipException("no spec of this deployment has its source connection defined: nothing to check")
    hook = KafkaConnectHook(kafka_connect_conn_id)
    statuses = hook.list_connectors(expand_status=True)
    assert isinstance(statuses, dict)
    expected = {s.name: s.connect_name for s in specs}
    restarted: list[str] = []
    for connector in failed_connectors(expected, statuses):
        trace = statuses[connector].failure_summary()
        log.warning("restarting the failed tasks of connector %s, which failed with:\n%s", connector, trace)
        hook.restart(connector, include_tasks=True, only_failed=True)
        statuses[connector] = _watch_restart(hook, connector, restart_wait_s, settle_s, sleep)
        if statuses[connector].is_running:
            log.warning("connector %s is RUNNING again after its restart", connector)
            restarted.append(
                f"connector {connector} was FAILED; its failed tasks were restarted and it has been RUNNING for "
                f"{settle_s:.0f} s. If the cause lasts, Debezium fails it again after its retries "
                f"(errors_max_retries) and the next run alerts again. It failed with:\n{trace}"
            )
    failures, warnings = connector_health_problems(expected, statuses)
    for warning in warnings:
        log.warning("%s", warning)
    if failures or restarted:
        raise AirflowFailException("\n\n".join(failures + restarted))
    return {s.connect_name: statuses[s.connect_name].describe() for s in specs}


def _watch_restart(
    hook: KafkaConnectHook, connector: str, wait_s: float, settle_s: float, sleep: Callable[[float], None]
) -> ConnectorStatus:
    """The connector's status once it is FAILED again, RUNNING for ``settle_s``, or ``wait_s`` went by.

    FAILED counts as failed again once the restart has shown (another state was seen) or after
    :data:`RESTART_STALE_S`: until then it may be the failure the restart is replacing."""
    waited, running_for = 0.0, 0.0
    step = 2.0
    restarted = False
    while True:
        status = hook.status(connector)
        restarted = restarted or not status.is_failed
        if (status.is_failed and (restarted or waited >= RESTART_STALE_S)) or waited >= wait_s:
            return status
        running_for = running_for + step if status.is_running else 0.0
        if running_for > settle_s:
            return status
        sleep(step)
        waited += step


def check_ingest_result(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate the ingest job's summary (the :class:`CdcSparkJobOperator` XCom) and fail on what its consistency checks found.

    Returns:
        The summary as a plain dict.

    Raises:
        AirflowFailException: when ``checks.ok`` is false (lists the problems; retrying the check cannot help).
        AirflowSkipException: when the run found the source busy (another run held its lock) and did nothing.
    """
    if not result or "summary" not in result:
        raise AirflowFailException(f"the ingest task returned no summary: {result!r}")
    summary = load_summary(result["summary"])
    if summary.status == SOURCE_BUSY:
        raise AirflowSkipException(summary.message or f"source {summary.source} was busy: nothing was done")
    for warning in summary.warnings():
        log.warning("%s", warning)
    log.info(
        "Batch %s of %s changed %s", summary.batch_id, summary.source, ", ".join(summary.changed_tables) or "nothing"
    )
    problems = summary.problems()
    if problems:
        raise AirflowFailException(
            f"consistency checks of batch {summary.batch_id} ({summary.source}) failed:\n" + "\n".join(problems)
        )
    return summary.model_dump(mode="json")


def check_dead_letters(summary: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Fail when the batch dead-lettered records, naming them per topic and reason (the batch is committed and
    its tables' Asset events are emitted all the same: this only flags the run).

    Returns:
        The batch's dead letters, topic -> reason -> records (empty: it had none).

    Raises:
        AirflowFailException: when the batch dead-lettered records (a retry cannot decode them).
    """
    parsed = load_summary(summary)
    report = parsed.dead_letter_report()
    if not report:
        log.info("Batch %s of %s dead-lettered no record", parsed.batch_id, parsed.source)
        return dict(parsed.dead_letters)
    page = f"{URL_PREFIX}/sources/{parsed.source}/dead-letters"
    if parsed.batch_id:
        page += f"?batch_id={parsed.batch_id}"
    raise AirflowFailException(
        f"batch {parsed.batch_id} of {parsed.source} committed, but {parsed.dead_lettered} record(s) could not be "
        f"decoded and went to {DEAD_LETTERS.identifier} instead of their tables:\n"
        + "\n".join(report)
        + f"\nSee the records in this DAG's CDC source tab (dead letters) or at {page}; the reasons are explained "
        "in docs/decoding.md (Dead-letter reasons). Once their cause is fixed (connector, spec or source), later "
        "batches decode such records; these stay in the dead-letter table."
    )


def publish_table_change(summary: Mapping[str, Any], asset: Asset, outlet_events: Any) -> dict[str, Any]:
    """Emit the Asset event of one table when the batch changed it; skip the task (no event) otherwise.

    Raises:
        AirflowSkipException: when the batch did not change the table.
    """
    parsed = load_summary(summary)
    if not parsed.changed(asset.name):
        raise AirflowSkipException(f"batch {parsed.batch_id} did not change {asset.name}")
    extra = parsed.event_extra(asset.name)
    outlet_events[asset].extra = extra
    log.info("Asset event for %s: %s", asset.name, extra)
    return extra


def plan_snapshot(params: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a ``cdc_snapshot`` request against its spec and return the signal's fields.

    Raises:
        AirflowFailException: on a table the spec does not capture, or a blocking filter with several
            tables (a retry cannot fix the request).
    """
    try:
        request = SnapshotRequest(load_spec(params["source"]), params["tables"], params["type"], params.get("filter"))
    except ValueError as exc:
        raise AirflowFailException(f"invalid snapshot request: {exc}") from exc
    fields = request.signal_fields()
    log.info("Snapshot request: %s", fields)
    return fields


def source_row_counts(spec: ConnectorSpec, data_collections: Sequence[str]) -> dict[str, int] | None:
    """Row counts in the source database through the reader connection ``<connection_id>_reader``
    (:mod:`cdclake.databases`).

    Returns:
        table -> rows, or None (with a warning) when the reader connection is not defined or the
        connector has no SQL (MongoDB).

    Raises:
        SourceDatabaseError: when the database cannot be reached or a table cannot be counted.
    """
    conn_id = reader_conn_id(spec)
    if spec.connector is ConnectorKind.MONGODB:
        log.warning("Spec %s is MongoDB: source row counts are not compared", spec.name)
        return None
    if not connection_defined(conn_id):
        log.warning(
            "Connection %s is not defined (AIRFLOW_CONN_%s): skipping the source/lake row-count comparison; "
            "the signal writer %s cannot SELECT the tables",
            conn_id,
            conn_id.upper(),
            spec.connection_id,
        )
        return None
    with open_database(DebeziumSignalHook(spec, database_conn_id=conn_id).source_connection()) as db:
        return db.row_counts(data_collections)


def compare_snapshot_counts(
    source: str, data_collections: Sequence[str], ingest_result: Mapping[str, Any] | None
) -> dict[str, Any]:
    """After a snapshot and one ingest batch: source rows == lake rows for every ``upsert`` table.

    Returns:
        ``{"compared": {table: [source, lake]}, "skipped": [tables]}``.

    Raises:
        AirflowFailException: when the batch's consistency checks failed or a count differs.
    """
    if ingest_result is not None:
        check_ingest_result(ingest_result)
    spec = load_spec(source)
    tables = [t for t in data_collections if comparable(spec, t)]
    skipped = [t for t in data_collections if t not in tables]
    for table in skipped:
        log.warning("Table %s is not an upsert table (lake keeps history): counts are not compared", table)
    source_counts = source_row_counts(spec, tables) if tables else {}
    if source_counts is None:
        return {"compared": {}, "skipped": list(data_collections)}
    counts: dict[str, tuple[int, int]] = {}
    for table in tables:
        identifier = spec_table_identifier(spec, table)
        lake = lake_row_count(identifier)
        counts[table] = (source_counts[table], lake or 0)
        log.info("%s: source %s row(s), lake %s (%s)", table, source_counts[table], lake, identifier)
    mismatches = count_mismatches(counts)
    if mismatches:
        raise AirflowFailException("source and lake row counts differ after the snapshot:\n" + "\n".join(mismatches))
    return {"compared": {t: list(c) for t, c in counts.items()}, "skipped": skipped}


def ingest_pending(source: str) -> bool:
    """Whether a batch of ``source`` has anything to do: new records in its topics, an interrupted batch to redo,
    or a quarantine release to apply (Kafka and the lake's ledger; no Spark). False skips the Spark job."""
    from cdclake.monitor import pending_work

    spec = load_spec(source)
    work = pending_work(spec, bootstrap=_kafka_bootstrap(spec))
    log.info("Source %s: %s", source, work.describe())
    return bool(work)


def _kafka_bootstrap(spec: ConnectorSpec) -> str:
    """``bootstrap.servers`` of ``kafka_default`` when it is defined, else the spec's."""
    if connection_defined(KAFKA_CONN_ID):
        servers = BaseHook.get_connection(KAFKA_CONN_ID).extra_dejson.get("bootstrap.servers")
        if servers:
            return str(servers)
    return spec.kafka_bootstrap_servers


def reconcile_under_lock(source: str, tables: Sequence[str] | None, run: str) -> dict[str, Any]:
    """Compare the source database with the lake, table by table, and record the verdicts in the lake
    (``cdc_audit.reconciliation``, what the CDC view shows).

    The source is read through the spec's reader connection (``<connection_id>_reader``); the lake is read
    while the task holds the source's lock, so that no batch commits in the middle of the comparison.

    Returns:
        ``{"source", "equal", "tables": {table: {"status", "source_rows", "lake_rows", "missing", "extra",
        "different", "sample"}}}``.

    Raises:
        AirflowSkipException: for a spec without SQL (MongoDB) or without its reader connection.
        AirflowFailException: after recording, when a table differs (names the tables and sample keys).
    """
    from pyiceberg.catalog import load_catalog

    from cdclake.ingest.lock import source_lock
    from cdclake.lake import LakeConfig
    from cdclake.reconcile import reconcile_source
    from cdclake.reconcile.audit import record_report, sample_keys

    spec = load_spec(source)
    if spec.connector is ConnectorKind.MONGODB:
        raise AirflowSkipException(f"spec {source} is MongoDB: reconciliation compares SQL tables")
    conn_id = reader_conn_id(spec)
    if not connection_defined(conn_id):
        raise AirflowSkipException(f"connection {conn_id} (the source's reader) is not defined: nothing to compare")
    connection = DebeziumSignalHook(spec, database_conn_id=conn_id).source_connection()
    lake = LakeConfig.from_env()
    lake.ensure_dirs()
    catalog = load_catalog(**lake.pyiceberg_properties())
    with source_lock(catalog, spec.name, label=run):
        report = reconcile_source(spec, lake=lake, tables=list(tables or []) or None, connection=connection)
    record_report(catalog, report, run)
    out: dict[str, Any] = {"source": source, "equal": report.equal, "tables": {}}
    for t in report.tables:
        sample = sample_keys(t)
        out["tables"][t.source_table] = {
            "status": t.status,
            "source_rows": t.source_rows,
            "lake_rows": t.lake_rows,
            "missing": len(t.missing_keys),
            "extra": len(t.extra_keys),
            "different": len(t.different_keys),
            "sample": sample,
            "note": t.note,
        }
        log.info(
            "%s: %s (source %s rows, lake %s rows%s)",
            t.source_table,
            t.status,
            t.source_rows,
            t.lake_rows,
            f"; keys {sample}" if sample else "",
        )
    if not report.equal:
        different = {k: v for k, v in out["tables"].items() if v["status"] == "different"}
        raise AirflowFailException(
            f"source {source} and the lake differ: "
            + "; ".join(
                f"{k}: missing {v['missing']}, extra {v['extra']}, different {v['different']}, keys {v['sample']}"
                for k, v in different.items()
            )
        )
    return out
