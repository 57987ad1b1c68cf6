"""The JSON summary the ingestion job writes (``jobs/ingest.py --summary-json PATH``), as a typed model.

The fields the DAGs rely on::

    {"batch_id": str | null,            # null when there was nothing new
     "source": str,
     "tables": {"<iceberg identifier>": {"applied": int, "skipped": int, ...}},
     "changed_tables": [identifiers],
     "offsets": {...},                   # the batch's Kafka offset ranges, passed through
     "reconciliation": {"ok": bool, "problems": [str]}}

Other keys (``records``, ``dead_lettered``, ``status``, per-table details) are kept as they are and
passed through to Asset-event extras; the model does not constrain what the job may add.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cdclake.exceptions import ConfigError


class _SummaryModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class TableResult(_SummaryModel):
    """What one batch did to one Iceberg table (the job may report more keys)."""

    applied: int = 0
    skipped: int = 0
    dead_lettered: int = 0


class Reconciliation(_SummaryModel):
    """The job's own consistency checks."""

    ok: bool
    problems: tuple[str, ...] = ()


#: ``status`` of a run that found the source's lock held by another run: it read and wrote nothing.
SOURCE_BUSY = "source-busy"


class IngestSummary(_SummaryModel):
    """One ingest batch."""

    batch_id: str | None = None
    source: str
    status: str | None = None
    message: str | None = None
    tables: dict[str, TableResult] = Field(default_factory=dict)
    changed_tables: tuple[str, ...] = ()
    offsets: Any = None
    dead_lettered: int = 0
    reconciliation: Reconciliation

    def changed(self, identifier: str) -> bool:
        """Whether the batch committed changes to ``identifier``."""
        return identifier in self.changed_tables

    def problems(self) -> list[str]:
        """Reconciliation problems: the run fails when there is any (``reconciliation.ok`` false)."""
        if self.reconciliation.ok:
            return []
        return list(self.reconciliation.problems) or ["reconciliation.ok is false (the job reported no problem text)"]

    def warnings(self) -> list[str]:
        """Worth a warning but not a failure: dead-lettered records (they are kept in the dead-letter table)."""
        out = [
            f"{identifier}: {result.dead_lettered} record(s) dead-lettered"
            for identifier, result in self.tables.items()
            if result.dead_lettered
        ]
        if self.dead_lettered and not out:
            out.append(f"batch {self.batch_id}: {self.dead_lettered} record(s) dead-lettered")
        return out

    def event_extra(self, identifier: str) -> dict[str, Any]:
        """The Asset-event ``extra`` for one changed table: batch id, source, the table's result, the offsets."""
        result = self.tables.get(identifier)
        return {
            "batch_id": self.batch_id,
            "source": self.source,
            "table": json.loads(result.model_dump_json()) if result else {},
            "offsets": self.offsets,
        }


def load_summary(data: str | Path | Mapping[str, Any]) -> IngestSummary:
    """Parse a summary from a file path, a JSON string or an already decoded mapping.

    Raises:
        ConfigError: when the file is missing or the content is not a valid summary (names the source).
    """
    where = "summary"
    if isinstance(data, Path) or (isinstance(data, str) and not data.lstrip().startswith("{")):
        path = Path(data)
        where = str(path)
        try:
            data = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the ingest summary {path}: {exc}") from exc
    try:
        return IngestSummary.model_validate_json(data) if isinstance(data, str) else IngestSummary.model_validate(data)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}: not a valid ingest summary: {exc}") from exc
