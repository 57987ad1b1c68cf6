"""Per-connector dialects, registered by ``source.connector``; importing this package registers all of them."""

from __future__ import annotations

from cdclake.dialects.base import Dialect, get_dialect, register_dialect, registered_connectors
from cdclake.dialects.informix import InformixDialect
from cdclake.dialects.mongodb import MongoDbDialect
from cdclake.dialects.mysql import MariaDbDialect, MySqlDialect
from cdclake.dialects.postgres import PostgresDialect

__all__ = [
    "Dialect",
    "InformixDialect",
    "MariaDbDialect",
    "MongoDbDialect",
    "MySqlDialect",
    "PostgresDialect",
    "get_dialect",
    "register_dialect",
    "registered_connectors",
]
