"""Source-vs-lake reconciliation results in the lake: ``lake.cdc_audit.reconciliation``.

The ``cdc_reconcile`` DAG's task appends one row per compared table (pyiceberg; a few rows), so that the CDC
view in Airflow shows the last verdict of every table without comparing anything when a page loads. Keys are
kept as a sample (the first :data:`SAMPLE_KEYS` of each kind); the counts are exact.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdclake.lake import audit
from cdclake.lake.catalog import AUDIT_NAMESPACE
from cdclake.lake.rows import ensure_namespace
from cdclake.reconcile.source import ReconcileReport, TableReconciliation

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

RECONCILIATION = audit.RECONCILIATION
SAMPLE_KEYS = 10


def reconciliation_schema() -> pa.Schema:
    """One row per compared table and run."""
    import pyarrow as pa

    text, count = pa.string(), pa.int64()
    return pa.schema(
        [
            pa.field("source", text, nullable=False),
            pa.field("source_table", text, nullable=False),
            pa.field("lake_table", text, nullable=False),
            pa.field("status", text, nullable=False),
            pa.field("source_rows", count),
            pa.field("lake_rows", count),
            pa.field("missing", count),
            pa.field("extra", count),
            pa.field("different", count),
            pa.field("duplicate", count),
            pa.field("missing_columns", text),
            pa.field("sample_keys", text),
            pa.field("note", text),
            pa.field("lake_batch_id", text),
            pa.field("database", text),
            pa.field("run", text),
            pa.field("checked_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def sample_keys(table: TableReconciliation) -> dict[str, list[list[Any]]]:
    """Up to :data:`SAMPLE_KEYS` keys of each kind of difference the table has (pure)."""
    kinds = (
        ("missing", table.missing_keys),
        ("extra", table.extra_keys),
        ("different", table.different_keys),
        ("duplicate", table.duplicate_keys),
    )
    return {kind: [list(k) for k in keys[:SAMPLE_KEYS]] for kind, keys in kinds if keys}


def report_rows(report: ReconcileReport, run: str, checked_at: datetime) -> list[dict[str, Any]]:
    """The rows of one report (pure)."""
    rows = []
    for t in report.tables:
        sample = sample_keys(t)
        rows.append(
            {
                "source": report.source,
                "source_table": t.source_table,
                "lake_table": t.lake_table,
                "status": t.status,
                "source_rows": t.source_rows,
                "lake_rows": t.lake_rows,
                "missing": len(t.missing_keys),
                "extra": len(t.extra_keys),
                "different": len(t.different_keys),
                "duplicate": len(t.duplicate_keys),
                "missing_columns": ", ".join(t.missing_columns) or None,
                "sample_keys": json.dumps(sample, default=str) if sample else None,
                "note": t.note,
                "lake_batch_id": t.frontier.batch_id,
                "database": report.database,
                "run": run,
                "checked_at": checked_at,
            }
        )
    return rows


def record_report(catalog: Catalog, report: ReconcileReport, run: str, checked_at: datetime | None = None) -> int:
    """Append the report's rows in one commit (the table is created the first time); returns their number."""
    import pyarrow as pa

    rows = report_rows(report, run, checked_at or datetime.now(UTC))
    if not rows:
        return 0
    ensure_namespace(catalog, (AUDIT_NAMESPACE,))
    table = catalog.create_table_if_not_exists(
        (AUDIT_NAMESPACE, RECONCILIATION),
        schema=reconciliation_schema(),
        properties={"format-version": "2", "comment": "cdclake source-vs-lake reconciliation results"},
    )
    table.append(pa.Table.from_pylist(rows, schema=reconciliation_schema()), snapshot_properties={"cdc.run": run})
    return len(rows)


def latest_results(catalog: Catalog, sources: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The last result of every (source, table), newest run first; empty before the first reconciliation."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.expressions import In

    try:
        table = catalog.load_table((AUDIT_NAMESPACE, RECONCILIATION))
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    scan = table.scan(row_filter=In("source", list(sources))) if sources else table.scan()
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(scan.to_arrow().to_pylist(), key=lambda r: r["checked_at"]):
        latest[(row["source"], row["source_table"])] = row
    return sorted(latest.values(), key=lambda r: (r["source"], r["source_table"]))
