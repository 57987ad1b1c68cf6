"""The lake: an Apache Iceberg catalog, embedded (SQLite + local warehouse) or REST + object storage."""

from __future__ import annotations

from cdclake.lake.catalog import CATALOG_NAME, LakeConfig

__all__ = ["CATALOG_NAME", "LakeConfig"]
