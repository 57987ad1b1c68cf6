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
        numeric_precision, numeric_scale: of numeric types, None for others (MySQL/MariaDB ``BIT(n)``: n in
            ``numeric_precision``).
        datetime_precision: fractional-second digits of temporal types, None for others.
        character_length: ``character_maximum_length``: characters of character types, bits of PostgreSQL
            ``bit``/``bit varying``; None for others and for unbounded ones.
        type_name: the type's catalog name without modifiers, domains resolved to their base type: PostgreSQL
            ``pg_type.typname`` (``int4``, ``numeric``, ``bpchar``, ``_text``, ``mood``, ``geometry``); None
            when the catalog query does not read it (MySQL/MariaDB: ``data_type`` says it all).
        type_kind: what kind of type ``type_name`` is (PostgreSQL): ``base``, ``array``, ``enum``,
            ``composite``, ``range``, ``multirange`` or ``pseudo``; None when not read.
        domain: the PostgreSQL domain the column is declared with (its base type is in ``type_name``), or None.
        enum_values: the labels of an enum in their declared order (PostgreSQL enum types; MySQL/MariaDB
            ``ENUM`` and ``SET`` members); empty for other types.
        element: the element of a PostgreSQL array column, described as a column of its own (same name,
            nullable, the array's modifiers); None for other columns.
        unsigned: a MySQL/MariaDB ``UNSIGNED`` numeric column.
    """

    name: str
    ordinal: int
    data_type: str
    native_type: str
    nullable: bool
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    character_length: int | None = None
    type_name: str | None = None
    type_kind: str | None = None
    domain: str | None = None
    enum_values: tuple[str, ...] = ()
    element: SourceColumn | None = None
    unsigned: bool = False


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


#: Informix ``syscolumns.coltype`` base codes (the low byte) and the type each one is.
INFORMIX_COLTYPES: dict[int, str] = {
    0: "char",
    1: "smallint",
    2: "integer",
    3: "float",
    4: "smallfloat",
    5: "decimal",
    6: "serial",
    7: "date",
    8: "money",
    9: "null",
    10: "datetime",
    11: "byte",
    12: "text",
    13: "varchar",
    14: "interval",
    15: "nchar",
    16: "nvarchar",
    17: "int8",
    18: "serial8",
    19: "set",
    20: "multiset",
    21: "list",
    22: "row",
    23: "collection",
    40: "opaque",
    41: "opaque",
    43: "lvarchar",
    45: "boolean",
    52: "bigint",
    53: "bigserial",
}
#: Built-in opaque types (``syscolumns.extended_id`` of coltype 40/41, from ``sysxtdtypes``).
INFORMIX_EXTENDED_TYPES: dict[int, str] = {1: "lvarchar", 5: "boolean", 10: "blob", 11: "clob"}
#: ``syscolumns.coltype`` flags above the base code.
INFORMIX_NOT_NULL = 0x100
INFORMIX_DISTINCT = 0x800
INFORMIX_NAMED_ROW = 0x1000
#: DATETIME / INTERVAL qualifier codes of ``collength``.
INFORMIX_QUALIFIERS: dict[int, str] = {0: "YEAR", 2: "MONTH", 4: "DAY", 6: "HOUR", 8: "MINUTE", 10: "SECOND"}


def _informix_qualifier(code: int) -> str:
    if code > 10:
        return f"FRACTION({code - 10})"
    return INFORMIX_QUALIFIERS.get(code, f"qualifier {code}")


def informix_column(name: str, ordinal: int, coltype: int, collength: int, extended_id: int = 0) -> SourceColumn:
    """A column of an Informix table from its ``syscolumns`` row (``coltype``, ``collength``, ``extended_id``).

    ``data_type`` is the Informix type name (``decimal``, ``datetime``, ``blob``; ``distinct``, ``named row`` and
    ``coltype <n>`` for what this does not decode), ``native_type`` the declaration (``DECIMAL(12,4)``,
    ``DATETIME YEAR TO FRACTION(5)``). ``DECIMAL``/``MONEY`` precision and scale come from ``collength``
    (precision * 256 + scale; scale 255 is a floating-point decimal, read as no scale); ``DATETIME`` fraction
    digits are ``datetime_precision`` (0 up to ``SECOND``). Written from IBM's ``syscolumns`` documentation; no
    Informix server is run here to check it against.
    """
    nullable = not coltype & INFORMIX_NOT_NULL
    if coltype & INFORMIX_NAMED_ROW:
        return SourceColumn(name, ordinal, "named row", f"coltype {coltype}", nullable)
    if coltype & INFORMIX_DISTINCT:
        return SourceColumn(name, ordinal, "distinct", f"coltype {coltype}", nullable)
    base = coltype & 0xFF
    data_type = INFORMIX_COLTYPES.get(base, f"coltype {base}")
    if base in (40, 41):
        data_type = INFORMIX_EXTENDED_TYPES.get(extended_id, f"opaque {extended_id}")
    if data_type in ("decimal", "money"):
        precision, scale = divmod(collength, 256)
        if scale == 255:
            return SourceColumn(name, ordinal, data_type, f"{data_type.upper()}({precision})", nullable, precision)
        return SourceColumn(
            name, ordinal, data_type, f"{data_type.upper()}({precision},{scale})", nullable, precision, scale
        )
    if data_type in ("datetime", "interval"):
        qualifiers = collength % 256
        first, last = divmod(qualifiers, 16)
        native = f"{data_type.upper()} {_informix_qualifier(first)} TO {_informix_qualifier(last)}"
        return SourceColumn(name, ordinal, data_type, native, nullable, datetime_precision=max(last - 10, 0))
    if data_type in ("char", "nchar", "varchar", "nvarchar", "lvarchar"):
        length = collength % 256 if data_type in ("varchar", "nvarchar") else collength
        return SourceColumn(
            name, ordinal, data_type, f"{data_type.upper()}({length})", nullable, character_length=length
        )
    return SourceColumn(name, ordinal, data_type, data_type.upper(), nullable)
