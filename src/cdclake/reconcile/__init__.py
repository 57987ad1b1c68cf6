"""Reconcile the lake with the source: per table, row counts, an order-independent checksum of canonical
row renderings, and the keys that differ.

Public API::

    from cdclake.connectors import load_spec
    from cdclake.reconcile import reconcile_source

    report = reconcile_source(load_spec("postgres"), lake=LakeConfig.embedded(".lake"))
    report.equal, [t.different_keys for t in report.tables]

:mod:`cdclake.reconcile.rows` is the pure part (rendering, hashing, diffing row sets);
:mod:`cdclake.reconcile.source` reads the source database and the lake. See docs/reconcile.md.
"""

from __future__ import annotations

from cdclake.reconcile.rows import (
    ANY,
    ColumnType,
    RowSet,
    RowSetDiff,
    ValueKind,
    column_type_from_iceberg,
    combine_hashes,
    diff_row_sets,
    render_key,
    render_row,
    render_value,
    row_hash,
)
from cdclake.reconcile.source import (
    LakeFrontier,
    ReconcileError,
    ReconcileReport,
    SourceConnection,
    TableReconciliation,
    lake_frontier,
    lake_identifier,
    parse_connection,
    reader_connection_env,
    reconcile_source,
    resolve_source_connection,
    select_tables,
)

__all__ = [
    "ANY",
    "ColumnType",
    "LakeFrontier",
    "ReconcileError",
    "ReconcileReport",
    "RowSet",
    "RowSetDiff",
    "SourceConnection",
    "TableReconciliation",
    "ValueKind",
    "reader_connection_env",
    "column_type_from_iceberg",
    "combine_hashes",
    "diff_row_sets",
    "lake_frontier",
    "lake_identifier",
    "parse_connection",
    "reconcile_source",
    "render_key",
    "render_row",
    "render_value",
    "resolve_source_connection",
    "row_hash",
    "select_tables",
]
