"""MySQL and MariaDB (shared binlog logic): position = (binlog file number, pos, row)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.debezium import fields as f
from cdclake.dialects.base import Dialect, as_position_number, register_dialect

if TYPE_CHECKING:
    from pyspark.sql import Column


@register_dialect
class MySqlDialect(Dialect):
    """Binlog coordinates: numeric suffix of ``file`` (``mysql-bin.000010`` > ``.000009``), ``pos``, ``row``.

    GTIDs are not used for ordering: they are totally ordered only per originating server.
    """

    connectors = ("mysql",)

    def position(self, source: Column) -> list[Column]:
        file_number = as_position_number(F.regexp_extract(source[f.SRC_FILE], r"(\d+)$", 1))
        return [file_number, as_position_number(source[f.SRC_POS]), as_position_number(source[f.SRC_ROW])]

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        return db or schema


@register_dialect
class MariaDbDialect(MySqlDialect):
    """MariaDB connector (``source.connector = "mariadb"``); same binlog rules as MySQL."""

    connectors = ("mariadb",)
