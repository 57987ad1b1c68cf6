"""Schema consistency checks of a batch: the schema change topic and the data events against the lake.

* MySQL/MariaDB/Informix: every schema change event (topic ``<prefix>``) that changes a table
  (non-empty ``tableChanges``) is recorded in ``lake.cdc_audit.schema_changes`` with its DDL text,
  position and resulting column list. Events without table changes (``SET …``, ``USE …``, database
  DDL, MariaDB's session statements) are not table drift and are skipped.
* Every evolution the job applied to a lake table (column added/widened/missing, table created,
  quarantined, released from quarantine) is recorded too, with the batch's position watermark for
  that table.
* An **unexplained mismatch** fails the batch's consistency checks: a table whose latest DDL in the batch
  declares a column set that differs from the columns its data events in the same batch carry (a
  column the DDL added that events lack, or events carrying a column the DDL does not know).
  PostgreSQL has no schema topic: its drift is detected from the data events' schemas (the lake
  evolution records).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame


@dataclass(frozen=True)
class TableDdl:
    """A table change from a schema change event."""

    table: str
    change: str
    ddl: str
    columns: tuple[tuple[str, str], ...]
    position: list[int] | None
    offset: int


def _table_name(raw_id: str) -> str:
    """``"demo"."all_types"`` -> ``demo.all_types``."""
    return ".".join(part.strip('"`') for part in raw_id.split(".") if part)


def table_ddls(schema_changes: DataFrame) -> list[TableDdl]:
    """Table changes of the batch's schema change events, in position order (collected to the driver)."""
    out: list[TableDdl] = []
    for row in schema_changes.orderBy("position", "offset").collect():
        try:
            changes = json.loads(row["table_changes"] or "[]")
        except ValueError:
            changes = []
        for change in changes:
            table = change.get("table") or {}
            cols = tuple(
                (c.get("name", ""), str(c.get("typeName", "")).upper()) for c in table.get("columns", []) or []
            )
            out.append(
                TableDdl(
                    table=_table_name(change.get("id", "")),
                    change=str(change.get("type", "")),
                    ddl=row["ddl"] or "",
                    columns=cols,
                    position=[int(x) for x in row["position"]] if row["position"] is not None else None,
                    offset=int(row["offset"]),
                )
            )
    return out


def unexplained(
    ddls: Sequence[TableDdl],
    data_columns: Mapping[str, Sequence[str]],
    first_positions: Mapping[str, list[int]] | None = None,
    schema_topic_complete: bool = True,
) -> list[str]:
    """Problems: tables whose latest DDL's columns differ from the columns their data events carry (pure).

    The comparison is only made when it is conclusive: the schema change topic was read to its end
    in this batch (``schema_topic_complete``; a capped batch reads topics at different rates), and the
    table's latest DDL precedes every one of its events in the batch (``first_positions``), so all
    those events were written under that DDL.

    Args:
        ddls: table changes of the batch, in position order.
        data_columns: per table (``db.table``), the column names of its decoded data events.
        first_positions: per table, the smallest ``_cdc_position`` of its events in the batch.
        schema_topic_complete: whether the schema change topic was read up to its end.
    """
    if not schema_topic_complete:
        return []
    latest: dict[str, TableDdl] = {}
    for ddl in ddls:
        latest[ddl.table] = ddl
    problems = []
    for table, ddl in sorted(latest.items()):
        if ddl.change == "DROP" or table not in data_columns or not ddl.columns:
            continue
        first = (first_positions or {}).get(table)
        if first_positions is not None and (first is None or ddl.position is None or ddl.position[:3] >= first[:3]):
            continue  # events from before the DDL are in the batch: inconclusive
        declared = {name for name, _ in ddl.columns}
        carried = set(data_columns[table])
        for column in sorted(declared - carried):
            problems.append(
                f"{table}: column {column} declared by DDL at position {ddl.position} is missing from its events"
            )
        for column in sorted(carried - declared):
            problems.append(f"{table}: events carry column {column} unknown to the DDL at position {ddl.position}")
    return problems


def audit_rows(
    source: str,
    batch_id: str,
    ddls: Sequence[TableDdl],
    evolutions: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Rows for ``cdc_audit.schema_changes``."""
    rows = [
        {
            "source": source,
            "batch_id": batch_id,
            "table": d.table,
            "kind": f"source_{d.change.lower()}",
            "detail": json.dumps([f"{n} {t}" for n, t in d.columns]),
            "ddl": d.ddl,
            "position": json.dumps(d.position),
        }
        for d in ddls
    ]
    for table, result in sorted(evolutions.items()):
        for change in result.get("schema_changes", []):
            rows.append(
                {
                    "source": source,
                    "batch_id": batch_id,
                    "table": table,
                    "kind": "lake_evolution",
                    "detail": change,
                    "ddl": None,
                    "position": json.dumps(result.get("watermark")),
                }
            )
        if result.get("released"):
            released = result["released"]
            rows.append(
                {
                    "source": source,
                    "batch_id": batch_id,
                    "table": table,
                    "kind": "quarantine_released",
                    "detail": json.dumps(released, sort_keys=True),
                    "ddl": None,
                    "position": json.dumps(result.get("watermark")),
                }
            )
        if result.get("quarantined"):
            rows.append(
                {
                    "source": source,
                    "batch_id": batch_id,
                    "table": table,
                    "kind": "quarantined",
                    "detail": result["quarantined"],
                    "ddl": None,
                    "position": json.dumps(result.get("watermark")),
                }
            )
    return rows
