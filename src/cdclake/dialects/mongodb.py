"""MongoDB: documents are extended-JSON strings; position = (``source.ts_ms``, ``ord``)."""

from __future__ import annotations

from typing import ClassVar

from cdclake.dialects.base import Dialect, register_dialect


@register_dialect
class MongoDbDialect(Dialect):
    """``source.ts_ms`` (the oplog/resume-token timestamp, second granularity) then ``ord`` within the second."""

    connectors = ("mongodb",)
    position_rule: ClassVar[str] = "mongodb"
    document_store = True

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return db
