"""The metadata columns of the change rows (after the source columns). Lake identifiers: :mod:`cdclake.lake.names`."""

from __future__ import annotations

from cdclake.decode.columns import LAKE_META_COLUMNS as META_COLUMNS
from cdclake.decode.columns import LAKE_META_NAMES as META_NAMES

__all__ = ["META_COLUMNS", "META_NAMES"]
