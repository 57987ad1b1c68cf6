"""Informix: position = (``commit_lsn``, ``change_lsn``), numeric strings compared as ``decimal(38,0)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdclake.debezium import fields as f
from cdclake.dialects.base import Dialect, as_position_number, register_dialect

if TYPE_CHECKING:
    from pyspark.sql import Column


@register_dialect
class InformixDialect(Dialect):
    """LSNs are decimal strings that may exceed ``2**63``; they are compared as numbers, never as text."""

    connectors = ("informix",)

    def position(self, source: Column) -> list[Column]:
        return [as_position_number(source[f.SRC_COMMIT_LSN]), as_position_number(source[f.SRC_CHANGE_LSN])]

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return schema or db
