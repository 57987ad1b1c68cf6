"""The Connect field schemas Debezium sends for a table's columns, derived from the source database's catalog.

With the JsonConverter's ``schemas.enable=false`` a record carries no types; this module gives each column the
Connect schema Debezium would have sent with schemas on, from what the catalog says about the column
(:class:`~cdclake.databases.catalog.SourceColumn`) and the connector's type-handling settings
(:class:`TypeModes`). It is pure: reading the catalog is :meth:`SourceDatabase.table`'s job.

Public API::

    modes = TypeModes.from_connector_config(connect_config(spec, endpoint), "postgresql")
    connect_fields(db.table("inventory", "all_types"), "postgresql", modes)   # [{"field": "id", ...}, ...]
    connect_field(column, "mariadb", modes, table="demo.all_types")

The rules are Debezium 3.x's (``PostgresValueConverter``, ``BinlogValueConverters``, ``JdbcValueConverters``,
``TemporalPrecisionMode``; the Informix connector's documented mapping). The output has the shape the decoder
reads (:mod:`cdclake.decode.schema_source`): ``field``, ``type`` (Connect JSON names: ``int16``, ``float``,
``double``, ``bytes``...), ``optional``, and for logical types ``name``, ``version`` and ``parameters``
(``scale`` and ``connect.decimal.precision`` of a Decimal, ``length`` of Bits, ``allowed`` of an Enum); structs
carry ``fields``, arrays ``items``, maps ``keys`` and ``values``. Schema ``doc`` strings are not reproduced.

A column whose schema the rules cannot decide from the catalog raises :class:`ConnectSchemaError` naming the
table, the column, its native type and the setting that makes it decidable; nothing is guessed. Among them:

- an unknown type (PostgreSQL: with ``include.unknown.datatypes=false`` Debezium leaves the column out);
- a PostgreSQL array of ``money``, ``name``, ``interval``, ``bit varying``, ``xml``, ``point`` (Debezium leaves
  those out whatever the settings), and arrays whose element schema depends on driver metadata the catalog does
  not give (``numeric[]`` under ``decimal.handling.mode=precise``, ``time[]``/``timestamp[]`` under the adaptive
  time modes);
- types Debezium sends in a shape cdclake does not model (PostgreSQL ``circle``, ``line``, ``tsvector``,
  pgvector types; PostgreSQL ``bit[]``);
- an Informix ``DATETIME`` whose qualifier is not ``YEAR TO SECOND``/``YEAR TO FRACTION(n)``, ``INTERVAL``,
  ``MONEY`` and the collection/opaque types the connector does not document (``INT8``, ``SERIAL8``, ``NCHAR``
  and ``NVARCHAR``, missing from its table too, are mapped as the JDBC types BIGINT, NCHAR and NVARCHAR).

Notes on what the catalog cannot show:

- MySQL/MariaDB ``BOOLEAN`` is ``TINYINT(1)`` in the catalog, which is what Debezium reads in a snapshot
  (``SHOW CREATE TABLE``): INT16, or BOOLEAN when the ``TinyIntOneToBooleanConverter`` is configured. A table
  created while the connector streams arrives as BOOLEAN from the original DDL; configure the converter to make
  both the same.
- TOAST-able PostgreSQL types (``text``, ``bytea``, ``jsonb``, arrays...) have no schema of their own: an
  unchanged TOASTed value arrives as the placeholder within the same schema.
- PostgreSQL domains take their base type's schema (with the domain's type modifier); an array of a domain is
  an unknown type to Debezium.
- ``column.propagate.source.type`` parameters and ``field.name.adjustment.mode`` renames are not reproduced.

Informix is mapped from ``syscolumns`` (see :func:`cdclake.databases.catalog.informix_column`) following the
connector's documentation; no Informix server runs here, so it is untested against one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cdclake.connectors import properties as p
from cdclake.databases.catalog import SourceColumn, SourceTable
from cdclake.databases.connection import dialect_name
from cdclake.debezium import fields as f
from cdclake.exceptions import ConfigError, ConnectSchemaError

#: The dialects this module maps.
DIALECTS = ("postgresql", "mysql", "mariadb", "informix")
_BINLOG = ("mysql", "mariadb")

DECIMAL_HANDLING_MODES = ("precise", "double", "string")
BINARY_HANDLING_MODES = ("bytes", "base64", "base64-url-safe", "hex")
BIGINT_UNSIGNED_HANDLING_MODES = ("long", "precise")
HSTORE_HANDLING_MODES = ("json", "map")
INTERVAL_HANDLING_MODES = ("numeric", "string")
#: ``time.precision.mode`` values each connector accepts (MySQL/MariaDB reject ``adaptive``; Informix documents
#: ``adaptive`` and ``connect`` only).
TIME_PRECISION_MODES: dict[str, tuple[str, ...]] = {
    "postgresql": ("adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"),
    "mysql": ("adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"),
    "mariadb": ("adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"),
    "informix": ("adaptive", "connect"),
}
#: Debezium's default ``time.precision.mode`` per connector.
TIME_PRECISION_DEFAULTS: dict[str, str] = {
    "postgresql": "adaptive",
    "mysql": "adaptive_time_microseconds",
    "mariadb": "adaptive_time_microseconds",
    "informix": "adaptive",
}
#: Debezium's default ``money.fraction.digits`` (PostgreSQL).
MONEY_FRACTION_DIGITS_DEFAULT = 2
#: The ``length`` of Bits for a PostgreSQL ``bit varying`` without a length (Integer.MAX_VALUE).
UNBOUNDED_BITS = 2**31 - 1
#: ``connect.decimal.precision`` of a MySQL ``BIGINT UNSIGNED`` under ``bigint.unsigned.handling.mode=precise``.
BIGINT_UNSIGNED_PRECISION = 20


def _check(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{what}={value!r} is not valid; it accepts {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class TypeModes:
    """The connector settings that decide a column's Connect schema (Debezium's defaults when not given).

    Attributes:
        decimal_handling: ``decimal.handling.mode``: ``precise`` (Decimal / VariableScaleDecimal), ``double``,
            ``string``.
        time_precision: ``time.precision.mode``: ``adaptive``, ``adaptive_time_microseconds``, ``connect``,
            ``isostring``, ``microseconds``, ``nanoseconds`` (what the connector accepts, see
            :data:`TIME_PRECISION_MODES`).
        binary_handling: ``binary.handling.mode``: ``bytes``, or ``base64``, ``base64-url-safe``, ``hex`` (strings).
        bigint_unsigned: ``bigint.unsigned.handling.mode`` (MySQL/MariaDB): ``long`` (INT64) or ``precise``
            (Decimal, scale 0).
        hstore_handling: ``hstore.handling.mode`` (PostgreSQL): ``json`` (Json string) or ``map``.
        interval_handling: ``interval.handling.mode`` (PostgreSQL): ``numeric`` (MicroDuration) or ``string``.
        include_unknown_datatypes: ``include.unknown.datatypes`` (PostgreSQL): unknown types are sent as binary
            (``binary_handling``) instead of being left out.
        money_fraction_digits: ``money.fraction.digits`` (PostgreSQL): the scale of ``money`` as a Decimal.
        tinyint1_boolean: a ``TinyIntOneToBooleanConverter`` is configured (MySQL/MariaDB): ``TINYINT(1)`` is BOOLEAN.
        tinyint1_boolean_selector: the converter's ``selector`` regular expressions over
            ``<database>.<table>.<column>``; empty means every ``TINYINT(1)`` column.
    """

    decimal_handling: str = "precise"
    time_precision: str = "adaptive"
    binary_handling: str = "bytes"
    bigint_unsigned: str = "long"
    hstore_handling: str = "json"
    interval_handling: str = "numeric"
    include_unknown_datatypes: bool = False
    money_fraction_digits: int = MONEY_FRACTION_DIGITS_DEFAULT
    tinyint1_boolean: bool = False
    tinyint1_boolean_selector: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check(self.decimal_handling, DECIMAL_HANDLING_MODES, p.DECIMAL_HANDLING_MODE)
        _check(self.time_precision, TIME_PRECISION_MODES["postgresql"], p.TIME_PRECISION_MODE)
        _check(self.binary_handling, BINARY_HANDLING_MODES, p.BINARY_HANDLING_MODE)
        _check(self.bigint_unsigned, BIGINT_UNSIGNED_HANDLING_MODES, p.BIGINT_UNSIGNED_HANDLING_MODE)
        _check(self.hstore_handling, HSTORE_HANDLING_MODES, p.HSTORE_HANDLING_MODE)
        _check(self.interval_handling, INTERVAL_HANDLING_MODES, p.INTERVAL_HANDLING_MODE)
        if self.money_fraction_digits < 0:
            raise ConfigError(f"{p.MONEY_FRACTION_DIGITS}={self.money_fraction_digits} must be 0 or more")

    @classmethod
    def defaults(cls, dialect: str) -> TypeModes:
        """Debezium's defaults for a connector (``postgresql``, ``mysql``, ``mariadb``, ``informix``).

        Raises:
            ConfigError: for a dialect this module does not map.
        """
        return cls(time_precision=TIME_PRECISION_DEFAULTS[_dialect(dialect)])

    @classmethod
    def from_connector_config(cls, config: Mapping[str, str], dialect: str) -> TypeModes:
        """The modes of a Kafka Connect connector config (:func:`cdclake.connectors.connect_config`).

        Properties a connector does not have are ignored (``hstore.handling.mode`` for MySQL); an unset one takes
        Debezium's default for the connector. Values are matched case-insensitively, as Debezium does.

        Args:
            config: the connector config (property name to string value).
            dialect: ``postgresql``, ``mysql``, ``mariadb`` or ``informix`` (or a connection type such as
                ``postgres``).

        Raises:
            ConfigError: for an invalid value (names the property and what it accepts), a dialect this module
                does not map, or a custom converter whose effect on column schemas the catalog cannot tell.
        """
        name = _dialect(dialect)

        def read(prop: str, allowed: tuple[str, ...], default: str) -> str:
            raw = config.get(prop)
            value = default if raw is None or not str(raw).strip() else str(raw).strip().lower()
            if value not in allowed:
                raise ConfigError(
                    f"{prop}={raw!r} is not accepted by the {name} connector; it accepts {', '.join(allowed)}"
                )
            return value

        modes: dict[str, Any] = {
            "decimal_handling": read(p.DECIMAL_HANDLING_MODE, DECIMAL_HANDLING_MODES, "precise"),
            "time_precision": read(p.TIME_PRECISION_MODE, TIME_PRECISION_MODES[name], TIME_PRECISION_DEFAULTS[name]),
            "binary_handling": read(p.BINARY_HANDLING_MODE, BINARY_HANDLING_MODES, "bytes"),
        }
        if name == "postgresql":
            modes["hstore_handling"] = read(p.HSTORE_HANDLING_MODE, HSTORE_HANDLING_MODES, "json")
            modes["interval_handling"] = read(p.INTERVAL_HANDLING_MODE, INTERVAL_HANDLING_MODES, "numeric")
            modes["include_unknown_datatypes"] = read(p.INCLUDE_UNKNOWN_DATATYPES, ("true", "false"), "false") == "true"
            digits = str(config.get(p.MONEY_FRACTION_DIGITS, MONEY_FRACTION_DIGITS_DEFAULT)).strip()
            if not digits.isdigit():
                raise ConfigError(
                    f"{p.MONEY_FRACTION_DIGITS}={digits!r} is not valid; it accepts an integer, 0 or more"
                )
            modes["money_fraction_digits"] = int(digits)
        if name in _BINLOG:
            modes["bigint_unsigned"] = read(p.BIGINT_UNSIGNED_HANDLING_MODE, BIGINT_UNSIGNED_HANDLING_MODES, "long")
        modes.update(_converters(config, name))
        return cls(**modes)


def _dialect(dialect: str) -> str:
    name = dialect_name(dialect) or dialect
    if name not in DIALECTS:
        raise ConfigError(f"no Connect type mapping for the {dialect!r} connector; mapped: {', '.join(DIALECTS)}")
    return name


def _converters(config: Mapping[str, str], dialect: str) -> dict[str, Any]:
    """The modes set by ``converters``: the TINYINT(1) to BOOLEAN converter; any other converter is refused."""
    names = [n.strip() for n in str(config.get(p.CONVERTERS) or "").split(",") if n.strip()]
    modes: dict[str, Any] = {}
    for name in names:
        cls = str(config.get(name + p.CONVERTER_TYPE_SUFFIX) or "").strip()
        if dialect in _BINLOG and cls.rsplit(".", 1)[-1] == p.TINYINT_ONE_TO_BOOLEAN_CONVERTER:
            checker = name + p.CONVERTER_LENGTH_CHECKER_SUFFIX
            if str(config.get(checker, "true")).strip().lower() == "false":
                raise ConfigError(
                    f"{checker}=false: the {cls} then converts TINYINT columns of any length, which "
                    "cdclake does not model; remove the property (the default converts TINYINT(1) only)"
                )
            selector = str(config.get(name + p.CONVERTER_SELECTOR_SUFFIX) or "")
            modes["tinyint1_boolean"] = True
            modes["tinyint1_boolean_selector"] = tuple(s.strip() for s in selector.split(",") if s.strip())
            continue
        raise ConfigError(
            f"{p.CONVERTERS}: {name} ({name}{p.CONVERTER_TYPE_SUFFIX}={cls or 'unset'}) is a custom converter; "
            "the column schemas it produces cannot be derived from the source catalog: remove it from "
            f"{p.CONVERTERS}, or give the ingestion job the schemas another way (a schema file)"
        )
    return modes


# --- schema builders ---------------------------------------------------------------------------


def _logical(type_: str, name: str, **parameters: str) -> dict[str, Any]:
    schema: dict[str, Any] = {f.SCHEMA_TYPE: type_, f.SCHEMA_NAME: name, f.SCHEMA_VERSION: 1}
    if parameters:
        schema[f.SCHEMA_PARAMETERS] = parameters
    return schema


def _plain(type_: str) -> dict[str, Any]:
    return {f.SCHEMA_TYPE: type_}


def _item(schema: dict[str, Any], *, optional: bool) -> dict[str, Any]:
    return {**schema, f.SCHEMA_OPTIONAL: optional}


def _array(items: dict[str, Any], *, optional_items: bool = True) -> dict[str, Any]:
    return {f.SCHEMA_TYPE: "array", f.SCHEMA_ITEMS: _item(items, optional=optional_items)}


def _decimal_schema(scale: int, precision: int | None) -> dict[str, Any]:
    params = {f.DECIMAL_SCALE: str(scale)}
    if precision is not None:
        params[f.DECIMAL_PRECISION] = str(precision)
    return _logical("bytes", f.CONNECT_DECIMAL, **params)


def _variable_scale_decimal() -> dict[str, Any]:
    return {
        **_logical("struct", f.DBZ_VARIABLE_SCALE_DECIMAL),
        f.SCHEMA_FIELDS: [
            {f.SCHEMA_FIELD: f.VSD_SCALE, f.SCHEMA_TYPE: "int32", f.SCHEMA_OPTIONAL: False},
            {f.SCHEMA_FIELD: f.VSD_VALUE, f.SCHEMA_TYPE: "bytes", f.SCHEMA_OPTIONAL: False},
        ],
    }


def _geometry(name: str) -> dict[str, Any]:
    return {
        **_logical("struct", name),
        f.SCHEMA_FIELDS: [
            {f.SCHEMA_FIELD: f.GEOMETRY_WKB, f.SCHEMA_TYPE: "bytes", f.SCHEMA_OPTIONAL: False},
            {f.SCHEMA_FIELD: f.GEOMETRY_SRID, f.SCHEMA_TYPE: "int32", f.SCHEMA_OPTIONAL: True},
        ],
    }


def _point() -> dict[str, Any]:
    return {
        **_logical("struct", f.DBZ_POINT),
        f.SCHEMA_FIELDS: [
            {f.SCHEMA_FIELD: f.POINT_X, f.SCHEMA_TYPE: "double", f.SCHEMA_OPTIONAL: False},
            {f.SCHEMA_FIELD: f.POINT_Y, f.SCHEMA_TYPE: "double", f.SCHEMA_OPTIONAL: False},
            {f.SCHEMA_FIELD: f.GEOMETRY_WKB, f.SCHEMA_TYPE: "bytes", f.SCHEMA_OPTIONAL: True},
            {f.SCHEMA_FIELD: f.GEOMETRY_SRID, f.SCHEMA_TYPE: "int32", f.SCHEMA_OPTIONAL: True},
        ],
    }


def _bits(length: int) -> dict[str, Any]:
    return _logical("bytes", f.DBZ_BITS, **{f.BITS_LENGTH: str(length)})


def _bits_or_boolean(length: int) -> dict[str, Any]:
    return _bits(length) if length > 1 else _plain("boolean")


def _json() -> dict[str, Any]:
    return _logical("string", f.DBZ_JSON)


@dataclass(frozen=True)
class _Column:
    """One column being mapped, with what its errors name."""

    column: SourceColumn
    dialect: str
    modes: TypeModes
    table: str

    def error(self, what: str, fix: str) -> ConnectSchemaError:
        c = self.column
        return ConnectSchemaError(f"{self.table}.{c.name} (native type {c.native_type}, {self.dialect}): {what}; {fix}")

    def unknown(self, what: str | None = None) -> ConnectSchemaError:
        what = what or f"{self.column.native_type} is not a type Debezium's {self.dialect} connector maps"
        if self.dialect == "postgresql":
            return self.error(
                what + ", and with include.unknown.datatypes=false Debezium leaves the column out of its events",
                "set include.unknown.datatypes=true (the column then arrives as binary.handling.mode's binary), "
                "or exclude the column (column.exclude.list)",
            )
        return self.error(what, "exclude the column from the connector (column.exclude.list)")

    def binary(self) -> dict[str, Any]:
        return _plain("bytes") if self.modes.binary_handling == "bytes" else _plain("string")

    def decimal(self, precision: int | None, scale: int | None, *, variable: bool) -> dict[str, Any]:
        """A decimal under ``decimal.handling.mode``; ``variable``: no scale means VariableScaleDecimal."""
        mode = self.modes.decimal_handling
        if mode == "double":
            return _plain("double")
        if mode == "string":
            return _plain("string")
        if scale is None:
            if variable:
                return _variable_scale_decimal()
            raise self.error(
                "the catalog gives the decimal no scale, and decimal.handling.mode=precise needs one",
                "set decimal.handling.mode=double or string, or give the column a scale",
            )
        return _decimal_schema(scale, precision)

    def precision(self, column: SourceColumn | None = None) -> int:
        value = (column or self.column).datetime_precision
        if value is None:
            raise self.error(
                f"the catalog gives no fractional-second precision, which time.precision.mode="
                f"{self.modes.time_precision} needs",
                "set time.precision.mode=connect, microseconds, nanoseconds or isostring",
            )
        return value

    def date(self) -> dict[str, Any]:
        mode = self.modes.time_precision
        if mode == "connect":
            return _logical("int32", f.CONNECT_DATE)
        if mode == "isostring":
            return _logical("string", f.DBZ_ISO_DATE)
        return _logical("int32", f.DBZ_DATE)

    def time(self, column: SourceColumn | None = None) -> dict[str, Any]:
        mode = self.modes.time_precision
        if mode == "connect":
            return _logical("int32", f.CONNECT_TIME)
        if mode == "isostring":
            return _logical("string", f.DBZ_ISO_TIME)
        if mode in ("adaptive_time_microseconds", "microseconds"):
            return _logical("int64", f.DBZ_MICRO_TIME)
        if mode == "nanoseconds":
            return _logical("int64", f.DBZ_NANO_TIME)
        digits = self.precision(column)
        if digits <= 3:
            return _logical("int32", f.DBZ_TIME)
        return _logical("int64", f.DBZ_MICRO_TIME if digits <= 6 else f.DBZ_NANO_TIME)

    def timestamp(self, column: SourceColumn | None = None) -> dict[str, Any]:
        mode = self.modes.time_precision
        if mode == "connect":
            return _logical("int64", f.CONNECT_TIMESTAMP)
        if mode == "isostring":
            return _logical("string", f.DBZ_ISO_TIMESTAMP)
        if mode == "microseconds":
            return _logical("int64", f.DBZ_MICRO_TIMESTAMP)
        if mode == "nanoseconds":
            return _logical("int64", f.DBZ_NANO_TIMESTAMP)
        digits = self.precision(column)
        if digits <= 3:
            return _logical("int64", f.DBZ_TIMESTAMP)
        return _logical("int64", f.DBZ_MICRO_TIMESTAMP if digits <= 6 else f.DBZ_NANO_TIMESTAMP)

    def enum(self, column: SourceColumn, name: str = f.DBZ_ENUM) -> dict[str, Any]:
        if not column.enum_values:
            raise self.error(
                "the catalog gave no members of the enum, which Debezium sends as its 'allowed' parameter",
                "read the table with cdclake.databases (its catalog query reads enum labels)",
            )
        return _logical("string", name, **{f.ENUM_ALLOWED: ",".join(column.enum_values)})


# --- PostgreSQL ----------------------------------------------------------------------------------

#: ``information_schema.columns.data_type`` to ``pg_type.typname``, for columns read without ``type_name``.
_PG_DATA_TYPES = {
    "smallint": "int2",
    "integer": "int4",
    "bigint": "int8",
    "real": "float4",
    "double precision": "float8",
    "boolean": "bool",
    "character varying": "varchar",
    "character": "bpchar",
    '"char"': "char",
    "time without time zone": "time",
    "time with time zone": "timetz",
    "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz",
    "bit varying": "varbit",
}
_PG_STRINGS = frozenset(
    (
        "bpchar varchar text char name citext isbn inet cidr macaddr macaddr8 "
        "int4range int8range numrange tsrange tstzrange daterange"
    ).split()
)
_PG_PLAIN = {"bool": "boolean", "int2": "int16", "int4": "int32", "int8": "int64", "oid": "int64"}
_PG_PLAIN.update({"float4": "float", "float8": "double"})
_PG_LOGICAL_STRINGS = {"json": f.DBZ_JSON, "jsonb": f.DBZ_JSON, "xml": f.DBZ_XML, "uuid": f.DBZ_UUID}
_PG_LOGICAL_STRINGS.update({"ltree": f.DBZ_LTREE, "timetz": f.DBZ_ZONED_TIME, "timestamptz": f.DBZ_ZONED_TIMESTAMP})
_PG_GEOMETRIC = {"box": f.DBZ_GEOMETRY, "lseg": f.DBZ_GEOMETRY, "path": f.DBZ_GEOMETRY, "polygon": f.DBZ_GEOMETRY}
_PG_GEOMETRIC.update({"geometry": f.DBZ_GEOMETRY, "geography": f.DBZ_GEOGRAPHY})
#: Types Debezium sends in shapes cdclake does not model, and what Debezium sends.
_PG_NOT_MODELED = {
    "circle": "io.debezium.data.geometry.Circle",
    "line": "io.debezium.data.geometry.Line",
    "tsvector": "io.debezium.data.TsVector",
    "vector": "io.debezium.data.DoubleVector",
    "halfvec": "io.debezium.data.FloatVector",
    "sparsevec": "io.debezium.data.SparseDoubleVector",
}
#: Array element types whose arrays Debezium leaves out of its events whatever the settings.
_PG_DROPPED_ARRAYS = frozenset("money name interval varbit xml point refcursor".split())
#: Array element types Debezium maps to optional element schemas.
_PG_ARRAY_ELEMENTS = frozenset(
    (
        "int2 int4 int8 oid char varchar text bpchar inet cidr macaddr macaddr8 tsrange tstzrange daterange "
        "int4range numrange int8range numeric float4 float8 bool date uuid json jsonb time timetz timestamp "
        "timestamptz bytea geometry geography citext hstore ltree"
    ).split()
)


def _pg_type_name(column: SourceColumn) -> str:
    if column.type_name:
        return column.type_name
    data_type = column.data_type.lower()
    if data_type in ("array", "user-defined"):
        return ""
    return _PG_DATA_TYPES.get(data_type, data_type)


def _pg_bits(c: _Column, column: SourceColumn, type_name: str) -> dict[str, Any]:
    length = column.character_length
    if length is None:
        if type_name == "bit":
            length = 1  # bit without a length is bit(1)
        else:
            length = UNBOUNDED_BITS
    return _bits_or_boolean(length)


def _pg_scalar(c: _Column, column: SourceColumn, type_name: str) -> dict[str, Any] | None:
    """The schema of a non-array, non-enum PostgreSQL type; None when Debezium does not know the type."""
    modes = c.modes
    if type_name in _PG_PLAIN:
        return _plain(_PG_PLAIN[type_name])
    if type_name in _PG_STRINGS:
        return _plain("string")
    if type_name in _PG_LOGICAL_STRINGS:
        return _logical("string", _PG_LOGICAL_STRINGS[type_name])
    if type_name in _PG_GEOMETRIC:
        return _geometry(_PG_GEOMETRIC[type_name])
    if type_name in ("bit", "varbit"):
        return _pg_bits(c, column, type_name)
    if type_name == "numeric":
        return c.decimal(column.numeric_precision, column.numeric_scale, variable=column.numeric_precision is None)
    if type_name == "money":
        if modes.decimal_handling == "precise":
            return _decimal_schema(modes.money_fraction_digits, None)
        return c.decimal(None, 0, variable=False)
    if type_name == "bytea":
        return c.binary()
    if type_name == "date":
        return c.date()
    if type_name == "time":
        return c.time(column)
    if type_name == "timestamp":
        return c.timestamp(column)
    if type_name == "interval":
        if modes.interval_handling == "string":
            return _logical("string", f.DBZ_INTERVAL)
        return _logical("int64", f.DBZ_MICRO_DURATION)
    if type_name == "point":
        return _point()
    if type_name == "hstore":
        if modes.hstore_handling == "map":
            return {
                f.SCHEMA_TYPE: "map",
                f.SCHEMA_KEYS: _item(_plain("string"), optional=False),
                f.SCHEMA_VALUES: _item(_plain("string"), optional=True),
            }
        return _json()
    if type_name in _PG_NOT_MODELED:
        raise c.error(
            f"Debezium sends {type_name} as {_PG_NOT_MODELED[type_name]}, which cdclake does not model",
            "exclude the column from the connector (column.exclude.list)",
        )
    return None


def _pg_array(c: _Column) -> dict[str, Any]:
    element = c.column.element
    if element is None:
        raise c.error(
            "the catalog gave no element type of the array",
            "read the table with cdclake.databases (its catalog query reads array element types)",
        )
    name = _pg_type_name(element)
    modes = c.modes
    if element.type_kind == "enum":
        return _array(c.enum(element), optional_items=False)
    if element.type_kind not in (None, "base"):
        return _pg_unknown_array(c, element)
    if name in _PG_DROPPED_ARRAYS:
        raise c.error(
            f"Debezium leaves {name}[] columns out of its events whatever its settings",
            "exclude the column from the connector (column.exclude.list) or change its type",
        )
    if name == "bit":
        raise c.error(
            "Debezium sends bit[] columns as a single Bits value, which cdclake does not model",
            "exclude the column from the connector (column.exclude.list) or use bit varying",
        )
    if name == "numeric" and modes.decimal_handling == "precise":
        raise c.error(
            "under decimal.handling.mode=precise the element schema of a numeric array depends on driver metadata "
            "the catalog does not give",
            "set decimal.handling.mode=double or string",
        )
    adaptive = modes.time_precision in ("adaptive", "adaptive_time_microseconds")
    if (name == "timestamp" and adaptive) or (name == "time" and modes.time_precision == "adaptive"):
        raise c.error(
            f"under time.precision.mode={modes.time_precision} the element schema of a {name} array depends on "
            "driver metadata the catalog does not give",
            "set time.precision.mode=connect, microseconds, nanoseconds or isostring",
        )
    if name in _PG_ARRAY_ELEMENTS:
        schema = _pg_scalar(c, element, name)
        if schema is not None:
            return _array(schema)
    return _pg_unknown_array(c, element)


def _pg_unknown_array(c: _Column, element: SourceColumn) -> dict[str, Any]:
    """An array of a type Debezium does not map (a domain, a composite): binary elements, or nothing."""
    if c.modes.include_unknown_datatypes:
        return _array(c.binary(), optional_items=False)
    raise c.unknown(f"Debezium does not map arrays of {element.native_type}")


def _postgres(c: _Column) -> dict[str, Any]:
    column = c.column
    kind = column.type_kind
    if kind == "array" or (kind is None and column.data_type.upper() == "ARRAY"):
        return _pg_array(c)
    if kind == "enum":
        return c.enum(column)
    name = _pg_type_name(column)
    if not name:
        raise c.error(
            f"the catalog says {column.data_type} without the type behind it",
            "read the table with cdclake.databases (its catalog query resolves user-defined types)",
        )
    schema = _pg_scalar(c, column, name) if kind in (None, "base") else None
    if schema is not None:
        return schema
    if c.modes.include_unknown_datatypes:
        return c.binary()
    raise c.unknown()


# --- MySQL / MariaDB -----------------------------------------------------------------------------

_MY_STRINGS = frozenset("char varchar tinytext text mediumtext longtext".split())
_MY_BINARY = frozenset("binary varbinary tinyblob blob mediumblob longblob".split())
_MY_GEOMETRY = frozenset(
    "geometry linestring polygon multipoint multilinestring multipolygon geometrycollection geomcollection".split()
)
_TINYINT_ONE = re.compile(r"^tinyint\s*\(\s*1\s*\)(\s+zerofill)?$", re.IGNORECASE)


def _tinyint1_boolean(c: _Column) -> bool:
    modes = c.modes
    if not modes.tinyint1_boolean or c.column.unsigned or not _TINYINT_ONE.match(c.column.native_type.strip()):
        return False
    if not modes.tinyint1_boolean_selector:
        return True
    qualified = f"{c.table}.{c.column.name}"
    return any(re.fullmatch(pattern, qualified, re.IGNORECASE) for pattern in modes.tinyint1_boolean_selector)


def _mysql(c: _Column) -> dict[str, Any]:
    column, modes = c.column, c.modes
    data_type = column.data_type.lower()
    unsigned = column.unsigned or " unsigned" in column.native_type.lower()
    if data_type == "tinyint":
        return _plain("boolean" if _tinyint1_boolean(c) else "int16")
    if data_type == "smallint":
        return _plain("int32" if unsigned else "int16")
    if data_type == "mediumint":
        return _plain("int32")
    if data_type in ("int", "integer"):
        return _plain("int64" if unsigned else "int32")
    if data_type == "bigint":
        if unsigned and modes.bigint_unsigned == "precise":
            return _decimal_schema(0, BIGINT_UNSIGNED_PRECISION)
        return _plain("int64")
    if data_type == "float":
        return _plain("float" if column.numeric_scale is None else "double")
    if data_type in ("double", "real", "double precision"):
        return _plain("double")
    if data_type in ("decimal", "numeric"):
        return c.decimal(column.numeric_precision, column.numeric_scale, variable=False)
    if data_type == "bit":
        if column.numeric_precision is None:
            raise c.error(
                "the catalog gives the BIT column no length",
                "read the table with cdclake.databases (numeric_precision)",
            )
        return _bits_or_boolean(column.numeric_precision)
    if data_type in _MY_STRINGS:
        return _plain("string")
    if data_type in _MY_BINARY:
        return c.binary()
    if data_type == "json":
        return _json()
    if data_type == "enum":
        return c.enum(column)
    if data_type == "set":
        return c.enum(column, f.DBZ_ENUM_SET)
    if data_type == "year":
        return _logical("int32", f.DBZ_YEAR)
    if data_type == "date":
        return c.date()
    if data_type == "time":
        return c.time()
    if data_type == "datetime":
        return c.timestamp()
    if data_type == "timestamp":
        return _logical("string", f.DBZ_ZONED_TIMESTAMP)
    if data_type == "point":
        return _point()
    if data_type in _MY_GEOMETRY:
        return _geometry(f.DBZ_GEOMETRY)
    raise c.unknown()


# --- Informix ------------------------------------------------------------------------------------

_IFX_PLAIN = {
    "smallint": "int16",
    "integer": "int32",
    "serial": "int32",
    "int8": "int64",
    "serial8": "int64",
    "bigint": "int64",
    "bigserial": "int64",
    "float": "double",
    "smallfloat": "float",
    "boolean": "boolean",
}
_IFX_STRINGS = frozenset("char nchar varchar nvarchar lvarchar text clob".split())
_IFX_TIMESTAMP = re.compile(r"^DATETIME YEAR TO (SECOND|FRACTION\(\d\))$", re.IGNORECASE)


def _informix(c: _Column) -> dict[str, Any]:
    column = c.column
    data_type = column.data_type.lower()
    if data_type in _IFX_PLAIN:
        return _plain(_IFX_PLAIN[data_type])
    if data_type in _IFX_STRINGS:
        return _plain("string")
    if data_type in ("byte", "blob"):
        return c.binary()
    if data_type == "decimal":
        return c.decimal(column.numeric_precision, column.numeric_scale, variable=True)
    if data_type == "date":
        return c.date()
    if data_type == "datetime":
        if not _IFX_TIMESTAMP.match(column.native_type.strip()):
            raise c.error(
                "the Informix connector documents DATETIME YEAR TO SECOND / YEAR TO FRACTION(n) only; the schema "
                "of other qualifiers depends on how the JDBC driver reports them",
                "declare the column DATETIME YEAR TO FRACTION(n), or exclude it (column.exclude.list)",
            )
        return c.timestamp()
    if data_type == "interval":
        raise c.error(
            "the Informix change stream client does not support INTERVAL",
            "exclude the column from the connector (column.exclude.list)",
        )
    raise c.unknown(f"the Informix connector does not document how it maps {column.native_type}")


_MAPPERS: dict[str, Callable[[_Column], dict[str, Any]]] = {
    "postgresql": _postgres,
    "mysql": _mysql,
    "mariadb": _mysql,
    "informix": _informix,
}


def connect_field(column: SourceColumn, dialect: str, modes: TypeModes, *, table: str) -> dict[str, Any]:
    """The Connect field schema Debezium sends for one column.

    Args:
        column: the column, as the source database's catalog describes it.
        dialect: ``postgresql``, ``mysql``, ``mariadb`` or ``informix``.
        modes: the connector's type-handling settings.
        table: ``<schema-or-database>.<table>``, named in errors (and matched by the TINYINT(1) converter's
            selector as ``<table>.<column>``).

    Returns:
        The field schema: ``field``, ``type``, ``optional`` (the column's nullability), and ``name``,
        ``version``, ``parameters``, ``fields``, ``items``, ``keys``, ``values`` as the type has them.

    Raises:
        ConnectSchemaError: when the rules cannot decide the schema from the catalog (names the table, the
            column, its native type and the setting to change).
        ConfigError: for a dialect this module does not map, or a ``time_precision`` its connector rejects.
    """
    name = _dialect(dialect)
    if modes.time_precision not in TIME_PRECISION_MODES[name]:
        raise ConfigError(
            f"{p.TIME_PRECISION_MODE}={modes.time_precision} is not accepted by the {name} connector; it accepts "
            f"{', '.join(TIME_PRECISION_MODES[name])}"
        )
    schema = _MAPPERS[name](_Column(column, name, modes, table))
    return {f.SCHEMA_FIELD: column.name, **schema, f.SCHEMA_OPTIONAL: column.nullable}


def connect_fields(table: SourceTable, dialect: str, modes: TypeModes) -> list[dict[str, Any]]:
    """The Connect field schemas of a table's row image (``before``/``after``), in column order.

    Raises:
        ConnectSchemaError: when the catalog shows no column of the table, or a column's schema cannot be
            decided (see :func:`connect_field`).
        ConfigError: for a dialect this module does not map.
    """
    qualified = ".".join(part for part in (table.namespace, table.name) if part)
    if not table.exists:
        raise ConnectSchemaError(
            f"the source database shows no columns of {qualified}: check that the table exists and that the "
            "reading user may see it"
        )
    return [connect_field(column, dialect, modes, table=qualified) for column in table.columns]
