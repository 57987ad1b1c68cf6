"""PostgreSQL: position = (commit LSN, LSN) from ``source.sequence``; TOAST placeholders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.debezium import fields as f
from cdclake.dialects.base import Dialect, as_position_number, register_dialect

if TYPE_CHECKING:
    from pyspark.sql import Column


@register_dialect
class PostgresDialect(Dialect):
    """``source.sequence`` is the JSON array string ``["<last commit lsn>", "<lsn>"]``.

    The position is ``(commit_lsn, lsn)``; a missing commit LSN (snapshot events) falls back to the LSN, a missing
    sequence (old connectors) to ``source.lsn`` for both, so the LSN is never used without a commit LSN before it.
    """

    connectors = ("postgresql",)
    has_unavailable_placeholder = True

    def position(self, source: Column) -> list[Column]:
        # '["<commit lsn>","<lsn>"]' (either may be null) split with string functions: from_json here would
        # switch the whole decode projection out of whole-stage codegen
        seq = F.split(F.translate(source[f.SRC_SEQUENCE], '[]" ', ""), ",")
        lsn = as_position_number(source[f.SRC_LSN])
        seq_lsn = F.coalesce(as_position_number(F.get(seq, 1)), lsn)
        commit = F.coalesce(as_position_number(F.get(seq, 0)), seq_lsn)
        return [commit, seq_lsn]

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return schema or db
