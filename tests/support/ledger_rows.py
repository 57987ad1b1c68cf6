"""Ledger rows written with pyiceberg for the monitor and ``cdclake audit`` tests (no Spark)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog

from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchRecord, batch_columns, ledger_schema


def summary(source: str, batch_id: str, applied: int, **extra: Any) -> dict[str, Any]:
    """A batch summary as the job writes it (the fields the readers use)."""
    return {
        "source": source,
        "batch_id": batch_id,
        "records": applied + 1,
        "dead_lettered": 1,
        "tables": {f"lake.{source}.inventory.orders": {"applied": applied, "skipped": 0, "dead_lettered": 1}},
        "transactions": {"counts": {"complete": applied, "held": 1}},
        "phases_s": {"plan": 0.25, "apply": 1.0},
        "checks": {"ok": True, "problems": []},
        "status": COMMITTED,
        **extra,
    }


def append_batches(
    catalog: Catalog, batches: list[tuple[str, str, int, datetime, dict[str, Any] | None]], typed: bool = True
) -> None:
    """A ``planned`` and a ``committed`` row per ``(source, batch_id, seq, committed_at, summary)`` (no committed
    row for a None summary); ``typed=False``: rows without the typed columns (summary only)."""
    catalog.create_namespace_if_not_exists(("cdc_audit",))
    table = catalog.create_table_if_not_exists(("cdc_audit", "batches"), schema=ledger_schema())
    rows = []
    for source, batch_id, seq, at, batch_summary in batches:
        statuses = [(PLANNED, None)] + ([(COMMITTED, batch_summary)] if batch_summary is not None else [])
        for status, s in statuses:
            rec = BatchRecord(source, batch_id, seq, status, [], {}, at)
            columns = batch_columns(rec, s) if typed else {}
            rows.append(
                {
                    "source": source,
                    "batch_id": batch_id,
                    "seq": seq,
                    "status": status,
                    "ranges": "[]",
                    "next_offsets": "{}",
                    "recorded_at": at,
                    "summary": json.dumps(s) if s is not None else None,
                    **{k: list(v.items()) if isinstance(v, dict) else v for k, v in columns.items()},
                }
            )
    table.append(pa.Table.from_pylist(rows, schema=ledger_schema()))
