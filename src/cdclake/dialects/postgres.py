"""PostgreSQL: position = (commit LSN, LSN) from ``source.sequence``; TOAST placeholders."""

from __future__ import annotations

from typing import ClassVar

from cdclake.dialects.base import Dialect, register_dialect


@register_dialect
class PostgresDialect(Dialect):
    """``source.sequence`` is the JSON array string ``["<last commit lsn>", "<lsn>"]``.

    The position is ``(commit_lsn, lsn)``; a missing commit LSN (snapshot events) falls back to the LSN, a missing
    sequence (old connectors) to ``source.lsn`` for both, so the LSN is never used without a commit LSN before it.
    """

    connectors = ("postgresql",)
    position_rule: ClassVar[str] = "postgresql"
    has_unavailable_placeholder = True

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return schema or db
