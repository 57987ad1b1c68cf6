"""What a source database says about a table's columns (``information_schema`` / ``pg_catalog``), as typed values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceColumn:
    """One column of a source table.

    Attributes:
        name: the column name.
        ordinal: its position in the table, from 1.
        data_type: ``information_schema.columns.data_type`` (``integer``, ``numeric``, ``timestamp with time zone``,
            ``ARRAY``, ``USER-DEFINED`` in PostgreSQL; ``int``, ``decimal``, ``datetime``, ``enum`` in MySQL/MariaDB).
        native_type: the declared type in full (PostgreSQL ``format_type``: ``numeric(12,2)``, ``text[]``, an enum's
            name; MySQL ``column_type``: ``int(10) unsigned``, ``enum('a','b')``).
        nullable: whether the column accepts NULL.
        numeric_precision, numeric_scale: of numeric types, None for others.
        datetime_precision: fractional-second digits of temporal types, None for others.
    """

    name: str
    ordinal: int
    data_type: str
    native_type: str
    nullable: bool
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None


@dataclass(frozen=True)
class SourceTable:
    """The columns of a source table, in ordinal order; none when the table does not exist (or cannot be seen).

    Attributes:
        namespace: the schema (PostgreSQL) or database (MySQL/MariaDB).
        name: the table name.
        columns: the columns, by ordinal.
    """

    namespace: str
    name: str
    columns: tuple[SourceColumn, ...] = ()

    @property
    def exists(self) -> bool:
        """Whether the database showed any column of the table."""
        return bool(self.columns)

    @property
    def column_names(self) -> list[str]:
        """The column names, in ordinal order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> SourceColumn:
        """The column called ``name``.

        Raises:
            KeyError: when the table has no such column.
        """
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(f"{self.namespace}.{self.name} has no column {name!r}; its columns: {self.column_names}")


def optional_int(value: object) -> int | None:
    """An ``information_schema`` number as an int (drivers return int, Decimal or None)."""
    return None if value is None else int(value)  # type: ignore[call-overload]
