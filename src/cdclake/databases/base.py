"""The :class:`SourceDatabase` interface (one open connection to a source database) and its error."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, ClassVar, Self

from cdclake.databases.catalog import SourceTable
from cdclake.databases.connection import SourceConnection
from cdclake.exceptions import NotInstalledError, SourceDatabaseError


def redact(text: str, secret: str) -> str:
    """``text`` with ``secret`` replaced by ``***`` (driver messages must not carry a password)."""
    return text.replace(secret, "***") if secret else text


def fix_hint(source: SourceConnection) -> str:
    """What to check when ``source`` cannot be reached."""
    if source.origin.startswith("local stack"):
        return "is the local stack up? (`cdclake stack status`; `cdclake stack up` starts it)"
    return f"check that the database is up and that {source.origin} has the right host, port, login and password"


class SourceDatabase(abc.ABC):
    """One open connection to a source database: its tables' columns, keys, rows and row counts.

    Build it with :func:`cdclake.databases.open_database`. The DB-API connection is :attr:`dbapi` (autocommit),
    for writers such as :func:`cdclake.signals.send_sql_signal`. Use it as a context manager, or :meth:`close` it.

    Attributes:
        source: where the database is.
        dbapi: the driver's DB-API connection.
    """

    #: The driver's distribution, named when it is not installed.
    driver: ClassVar[str] = ""

    def __init__(self, source: SourceConnection, dbapi: Any) -> None:
        self.source = source
        self.dbapi = dbapi

    @classmethod
    def open(cls, source: SourceConnection, *, utc: bool = True) -> Self:
        """Connect with the connection's connect and statement timeouts, in autocommit mode.

        Args:
            source: where the database is.
            utc: run the session in UTC, so that naive timestamps read back as UTC (as Debezium renders them).

        Raises:
            SourceDatabaseError: when the database cannot be reached (names the connection and what to check).
            NotInstalledError: when the driver is not installed.
        """
        try:
            dbapi = cls._connect(source, utc=utc)
        except ImportError as exc:
            raise NotInstalledError(
                f"{source.dialect} connections need the {cls.driver} package: pip install {cls.driver}"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - psycopg / PyMySQL raise their own hierarchies
            raise SourceDatabaseError(
                f"cannot connect to the source database {source.describe()}: "
                f"{redact(str(exc), source.password)}; {fix_hint(source)}"
            ) from exc
        return cls(source, dbapi)

    @classmethod
    @abc.abstractmethod
    def _connect(cls, source: SourceConnection, *, utc: bool) -> Any:
        """The driver's connection, timeouts set."""

    @abc.abstractmethod
    def table(self, namespace: str, table: str) -> SourceTable:
        """The table's columns (empty when the table does not exist or cannot be seen)."""

    def columns(self, namespace: str, table: str) -> list[str]:
        """Column names in ordinal order; empty when the table does not exist."""
        return self.table(namespace, table).column_names

    @abc.abstractmethod
    def primary_key(self, namespace: str, table: str) -> list[str]:
        """Primary-key column names in key order."""

    @abc.abstractmethod
    def rows(
        self, namespace: str, table: str, columns: Sequence[str], order_by: Sequence[str] = ()
    ) -> Iterator[tuple[Any, ...]]:
        """Every row of the table, ``columns`` only, streamed; sorted by ``order_by`` when given."""

    @abc.abstractmethod
    def row_count(self, namespace: str, table: str) -> int:
        """``SELECT COUNT(*)`` of the table."""

    def row_counts(self, names: Sequence[str]) -> dict[str, int]:
        """Row counts of data collections (``inventory.customers``, ``demo.orders``).

        Raises:
            SourceDatabaseError: when a table cannot be counted (names it and the connection).
        """
        counts = {}
        for name in names:
            namespace, _, table = name.rpartition(".")
            try:
                counts[name] = self.row_count(namespace, table)
            except Exception as exc:  # noqa: BLE001 - driver errors
                raise SourceDatabaseError(
                    f"cannot count the rows of {name} in {self.source.describe()}: {redact(str(exc), self.source.password)}"
                ) from exc
        return counts

    def close(self) -> None:
        """Close the connection."""
        self.dbapi.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source.describe()})"
