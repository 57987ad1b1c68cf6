"""MySQL and MariaDB (shared binlog logic): position = (binlog file number, pos, row)."""

from __future__ import annotations

from typing import ClassVar

from cdclake.dialects.base import Dialect, register_dialect


@register_dialect
class MySqlDialect(Dialect):
    """Binlog coordinates: numeric suffix of ``file`` (``mysql-bin.000010`` > ``.000009``), ``pos``, ``row``.

    GTIDs are not used for ordering: they are totally ordered only per originating server.
    """

    connectors = ("mysql",)
    position_rule: ClassVar[str] = "binlog"

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return db or schema


@register_dialect
class MariaDbDialect(MySqlDialect):
    """MariaDB connector (``source.connector = "mariadb"``); same binlog rules as MySQL."""

    connectors = ("mariadb",)
