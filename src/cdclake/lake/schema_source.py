"""Column types of schema-less records from the lake: the existing Iceberg table's schema (``schema_source: lake``).

The job writes each column's Connect type into the column's comment when it creates or widens a table
(:mod:`cdclake.ingest.schema`): the logical type name (``io.debezium.time.MicroTimestamp``), else the Connect
type (``int16``). Together with the Iceberg type (a decimal's scale, a list's element) that gives back the
Connect schema the records were decoded with. A column without such a comment (a table created by another
tool) is read by its Iceberg type alone:

============================  ==========================================
Iceberg type                  Connect schema of the wire value
============================  ==========================================
boolean, int, long            boolean, int32, int64
float, double                 float32, float64
decimal(p, s)                 ``org.apache.kafka.connect.data.Decimal``, scale s
string, uuid                  string
binary, fixed                 bytes (base64 on the wire)
date                          ``io.debezium.time.Date``
time                          ``io.debezium.time.MicroTime``
timestamp                     ``io.debezium.time.MicroTimestamp``
timestamptz                   ``io.debezium.time.ZonedTimestamp``
list<T>                       array of T
struct                        struct of its fields
============================  ==========================================

A column the records carry but the table lacks has no type here: the topic's records are dead-lettered
(``no_schema``) rather than decoded without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cdclake.debezium import fields as f
from cdclake.decode.columns import LAKE_META_NAMES
from cdclake.decode.schema_source import LOGICAL_BASE_TYPES, SchemaSource, column_schema
from cdclake.exceptions import ConnectSchemaError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.types import IcebergType, NestedField

logger = logging.getLogger(__name__)

_CONNECT_TYPES = frozenset({"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes"})


def iceberg_field_schema(column: NestedField) -> dict[str, Any]:
    """The Connect field schema of a lake column (its comment, else its Iceberg type; see the module's table).

    Raises:
        ConnectSchemaError: for an Iceberg type with no Connect counterpart (a map, for one).
    """
    schema = _type_schema(column.name, column.field_type, (column.doc or "").strip())
    return {**schema, f.SCHEMA_FIELD: column.name, f.SCHEMA_OPTIONAL: not column.required}


def _type_schema(name: str, kind: IcebergType, comment: str) -> dict[str, Any]:
    from pyiceberg import types as it

    if comment == f.CONNECT_DECIMAL and isinstance(kind, it.DecimalType):
        return column_schema(name, f"decimal({kind.precision},{kind.scale})")
    if comment in LOGICAL_BASE_TYPES or comment in (f.DBZ_GEOMETRY, f.DBZ_POINT, f.DBZ_GEOGRAPHY):
        return column_schema(name, comment)
    if comment in _CONNECT_TYPES:
        return column_schema(name, comment)
    simple: dict[type, str] = {
        it.BooleanType: "boolean",
        it.IntegerType: "int32",
        it.LongType: "int64",
        it.FloatType: "float32",
        it.DoubleType: "float64",
        it.StringType: "string",
        it.UUIDType: "string",
        it.BinaryType: "bytes",
        it.FixedType: "bytes",
        it.DateType: f.DBZ_DATE,
        it.TimeType: f.DBZ_MICRO_TIME,
        it.TimestampType: f.DBZ_MICRO_TIMESTAMP,
        it.TimestamptzType: f.DBZ_ZONED_TIMESTAMP,
    }
    for iceberg_type, spec in simple.items():
        if isinstance(kind, iceberg_type):
            return column_schema(name, spec)
    if isinstance(kind, it.DecimalType):
        return column_schema(name, f"decimal({kind.precision},{kind.scale})")
    if isinstance(kind, it.ListType):
        items = _type_schema(name, kind.element_type, "")
        items.pop(f.SCHEMA_FIELD, None)
        return {
            f.SCHEMA_FIELD: name,
            f.SCHEMA_TYPE: "array",
            f.SCHEMA_ITEMS: {**items, f.SCHEMA_OPTIONAL: not kind.element_required},
        }
    if isinstance(kind, it.StructType):
        return {
            f.SCHEMA_FIELD: name,
            f.SCHEMA_TYPE: "struct",
            f.SCHEMA_FIELDS: [iceberg_field_schema(sub) for sub in kind.fields],
        }
    raise ConnectSchemaError(f"column {name!r}: the lake type {kind} has no Connect counterpart")


class LakeSchemaSource(SchemaSource):
    """Row schemas from the lake's Iceberg tables, read once per batch.

    Args:
        catalog: the lake's pyiceberg catalog.
        identify: the lake identifier (without catalog) of a ``<db-or-schema>.<table>`` data collection.
    """

    def __init__(self, catalog: Catalog, identify: Callable[[str], str]) -> None:
        self._catalog = catalog
        self._identify = identify
        self._cache: dict[str, list[dict[str, Any]] | None] = {}

    def begin_batch(self) -> None:
        self._cache.clear()

    def describe(self) -> str:
        return "the lake's tables"

    def row_fields(
        self, topic: str, table: str | None, *, seen_fields: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]] | None:
        if table is None:
            return None
        if table not in self._cache:
            self._cache[table] = self._read(table)
        found = self._cache[table]
        return None if found is None else [dict(fld) for fld in found]

    def _read(self, table: str) -> list[dict[str, Any]] | None:
        from pyiceberg.exceptions import NoSuchTableError

        identifier = self._identify(table)
        try:
            schema = self._catalog.load_table(identifier).schema()
        except NoSuchTableError:
            logger.warning("schema source lake: %s has no lake table %s yet", table, identifier)
            return None
        meta = set(LAKE_META_NAMES)
        return [iceberg_field_schema(column) for column in schema.fields if column.name not in meta]
