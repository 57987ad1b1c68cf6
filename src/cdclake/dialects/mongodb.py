"""MongoDB: documents are extended-JSON strings; position = (``source.ts_ms``, ``ord``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdclake.debezium import fields as f
from cdclake.dialects.base import Dialect, as_position_number, register_dialect

if TYPE_CHECKING:
    from pyspark.sql import Column


@register_dialect
class MongoDbDialect(Dialect):
    """``source.ts_ms`` (the oplog/resume-token timestamp, second granularity) then ``ord`` within the second."""

    connectors = ("mongodb",)
    document_store = True

    def position(self, source: Column) -> list[Column]:
        return [as_position_number(source[f.SRC_TS_MS]), as_position_number(source[f.SRC_ORD])]

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return db
