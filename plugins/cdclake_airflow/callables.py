"""What the cdclake DAGs' ``@task`` functions do, as plain functions (the DAG files stay declarative).

Everything here runs at task run time: connections are looked up here, never at DAG parse time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from cdclake.assets import table_identifier
from cdclake.connectors import ConnectorKind, ConnectorSpec, load_spec, load_specs
from cdclake.exceptions import ConnectError, ConnectorFailedError
from cdclake.orchestration import (
    SnapshotRequest,
    comparable,
    connector_health_problems,
    count_mismatches,
    lake_row_count,
    load_summary,
    reader_conn_id,
    row_count_query,
    select_specs,
)
from cdclake_airflow.connections import connection_defined
from cdclake_airflow.hooks.debezium_signal import DebeziumSignalHook
from cdclake_airflow.hooks.kafka_connect import KafkaConnectHook

log = logging.getLogger(__name__)


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


def check_connectors_health(requested: Sequence[str] | None, kafka_connect_conn_id: str) -> dict[str, str]:
    """Fail when a connector or task of an active spec is FAILED or the connector is missing, quoting the trace.

    Returns:
        connector -> one-line status, for the XCom.

    Raises:
        ConnectorFailedError: with every failure (the worker's stack traces included).
    """
    specs = active_specs(requested)
    statuses = KafkaConnectHook(kafka_connect_conn_id).list_connectors(expand_status=True)
    assert isinstance(statuses, dict)
    failures, warnings = connector_health_problems({s.name: s.connect_name for s in specs}, statuses)
    for warning in warnings:
        log.warning("%s", warning)
    if failures:
        raise ConnectorFailedError("\n\n".join(failures))
    return {s.connect_name: statuses[s.connect_name].describe() for s in specs}


def check_ingest_result(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate the ingest job's summary (the :class:`CdcSparkJobOperator` XCom) and fail on reconciliation problems.

    Returns:
        The summary as a plain dict.

    Raises:
        AirflowFailException: when ``reconciliation.ok`` is false (lists the problems; retrying the check cannot help).
    """
    if not result or "summary" not in result:
        raise AirflowFailException(f"the ingest task returned no summary: {result!r}")
    summary = load_summary(result["summary"])
    for warning in summary.warnings():
        log.warning("%s", warning)
    log.info(
        "Batch %s of %s changed %s", summary.batch_id, summary.source, ", ".join(summary.changed_tables) or "nothing"
    )
    problems = summary.problems()
    if problems:
        raise AirflowFailException(
            f"reconciliation of batch {summary.batch_id} ({summary.source}) failed:\n" + "\n".join(problems)
        )
    return summary.model_dump(mode="json")


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
    """Row counts in the source database through the reader connection ``<connection_id>_app``.

    Returns:
        table -> rows, or None (with a warning) when the reader connection is not defined or the
        connector has no SQL (MongoDB).
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
    db = DebeziumSignalHook(spec, database_conn_id=conn_id).get_db_connection()
    try:
        counts = {}
        for table in data_collections:
            cursor = db.cursor()
            try:
                cursor.execute(row_count_query(spec, table))
                counts[table] = int(cursor.fetchone()[0])
            finally:
                cursor.close()
        return counts
    finally:
        db.close()


def compare_snapshot_counts(
    source: str, data_collections: Sequence[str], ingest_result: Mapping[str, Any] | None
) -> dict[str, Any]:
    """After a snapshot and one ingest batch: source rows == lake rows for every ``upsert`` table.

    Returns:
        ``{"compared": {table: [source, lake]}, "skipped": [tables]}``.

    Raises:
        AirflowFailException: when the batch's reconciliation failed or a count differs.
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
        identifier = table_identifier(spec, table)
        lake = lake_row_count(identifier)
        counts[table] = (source_counts[table], lake or 0)
        log.info("%s: source %s row(s), lake %s (%s)", table, source_counts[table], lake, identifier)
    mismatches = count_mismatches(counts)
    if mismatches:
        raise AirflowFailException("source and lake row counts differ after the snapshot:\n" + "\n".join(mismatches))
    return {"compared": {t: list(c) for t, c in counts.items()}, "skipped": skipped}
