"""Informix: position = (``commit_lsn``, ``change_lsn``), numeric strings compared as ``decimal(38,0)``."""

from __future__ import annotations

from typing import ClassVar

from cdclake.dialects.base import Dialect, register_dialect


@register_dialect
class InformixDialect(Dialect):
    """LSNs are decimal strings that may exceed ``2**63``; they are compared as numbers, never as text."""

    connectors = ("informix",)
    position_rule: ClassVar[str] = "informix"

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return schema or db
