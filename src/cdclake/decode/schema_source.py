"""Where column types come from when the JsonConverter runs with ``schemas.enable=false``.

With schemas off a record carries no types, so a base64 string could be bytes or a Decimal and an integer could
be a date. A :class:`SchemaSource` answers, per topic, with the Connect schema of the row image; nothing is ever
inferred from values. A Decimal whose scale the source does not declare is a :class:`ConnectSchemaError` (the
topic's records are dead-lettered with reason ``schema_error``). Avro + schema registry would be another
implementation of the same interface (not implemented).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdclake.debezium import fields as f
from cdclake.exceptions import ConfigError, ConnectSchemaError

if TYPE_CHECKING:
    from cdclake.connectors import ConnectorSpec

JsonSchema = Mapping[str, Any]

#: Base Connect type of each logical type name a column spec may use.
LOGICAL_BASE_TYPES: dict[str, str] = {
    f.CONNECT_DECIMAL: "bytes",
    f.CONNECT_DATE: "int32",
    f.CONNECT_TIME: "int32",
    f.CONNECT_TIMESTAMP: "int64",
    f.DBZ_VARIABLE_SCALE_DECIMAL: "struct",
    f.DBZ_DATE: "int32",
    f.DBZ_TIME: "int32",
    f.DBZ_MICRO_TIME: "int64",
    f.DBZ_NANO_TIME: "int64",
    f.DBZ_TIMESTAMP: "int64",
    f.DBZ_MICRO_TIMESTAMP: "int64",
    f.DBZ_NANO_TIMESTAMP: "int64",
    f.DBZ_ZONED_TIMESTAMP: "string",
    f.DBZ_ZONED_TIME: "string",
    f.DBZ_YEAR: "int32",
    f.DBZ_MICRO_DURATION: "int64",
    f.DBZ_INTERVAL: "string",
    f.DBZ_JSON: "string",
    f.DBZ_ENUM: "string",
    f.DBZ_ENUM_SET: "string",
    f.DBZ_BITS: "bytes",
    f.DBZ_UUID: "string",
    f.DBZ_XML: "string",
    f.DBZ_LTREE: "string",
}

_VSD_FIELDS = [
    {f.SCHEMA_FIELD: f.VSD_SCALE, f.SCHEMA_TYPE: "int32", f.SCHEMA_OPTIONAL: False},
    {f.SCHEMA_FIELD: f.VSD_VALUE, f.SCHEMA_TYPE: "bytes", f.SCHEMA_OPTIONAL: False},
]
_GEOMETRY_FIELDS = [
    {f.SCHEMA_FIELD: "wkb", f.SCHEMA_TYPE: "bytes", f.SCHEMA_OPTIONAL: False},
    {f.SCHEMA_FIELD: "srid", f.SCHEMA_TYPE: "int32", f.SCHEMA_OPTIONAL: True},
]
_DECIMAL_SPEC = re.compile(r"^decimal\s*\(\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?\)$|^decimal$", re.IGNORECASE)


def column_schema(name: str, spec: str | JsonSchema) -> dict[str, Any]:
    """Build the Connect field schema of one column from a short spec.

    Args:
        name: column name.
        spec: a Connect primitive (``"int64"``), ``"decimal(p,s)"``, a logical type name
            (``"io.debezium.time.MicroTimestamp"``), ``"geometry"``, or a full Connect schema dict.

    Returns:
        The Connect field schema (with ``field`` set to ``name``).
    """
    if isinstance(spec, Mapping):
        return {**spec, f.SCHEMA_FIELD: name}
    text = spec.strip()
    match = _DECIMAL_SPEC.match(text)
    if match:
        params: dict[str, str] = {}
        if match.group(2) is not None:
            params[f.DECIMAL_SCALE] = match.group(2)
        if match.group(1) is not None:
            params[f.DECIMAL_PRECISION] = match.group(1)
        return {
            f.SCHEMA_FIELD: name,
            f.SCHEMA_TYPE: "bytes",
            f.SCHEMA_NAME: f.CONNECT_DECIMAL,
            f.SCHEMA_PARAMETERS: params,
        }
    if text.lower() in ("geometry", "point", f.DBZ_GEOMETRY, f.DBZ_POINT, f.DBZ_GEOGRAPHY):
        return {
            f.SCHEMA_FIELD: name,
            f.SCHEMA_TYPE: "struct",
            f.SCHEMA_NAME: f.DBZ_GEOMETRY,
            f.SCHEMA_FIELDS: _GEOMETRY_FIELDS,
        }
    if text == f.DBZ_VARIABLE_SCALE_DECIMAL:
        return {f.SCHEMA_FIELD: name, f.SCHEMA_TYPE: "struct", f.SCHEMA_NAME: text, f.SCHEMA_FIELDS: _VSD_FIELDS}
    if text in LOGICAL_BASE_TYPES:
        return {f.SCHEMA_FIELD: name, f.SCHEMA_TYPE: LOGICAL_BASE_TYPES[text], f.SCHEMA_NAME: text}
    if text in (
        "int8",
        "int16",
        "int32",
        "int64",
        "float32",
        "float64",
        "float",
        "double",
        "boolean",
        "string",
        "bytes",
    ):
        return {f.SCHEMA_FIELD: name, f.SCHEMA_TYPE: text}
    raise ConnectSchemaError(f"column {name!r}: unknown type spec {spec!r}")


class SchemaSource(ABC):
    """Supplies row-image Connect schemas (and key columns) for topics whose records carry no schema.

    The ingestion job calls :meth:`begin_batch` before each batch's decoding, so a source that reads its
    schemas from somewhere that changes (the source database, the lake) reads them again once per batch.
    """

    @abstractmethod
    def row_fields(
        self, topic: str, table: str | None, *, seen_fields: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]] | None:
        """Connect field schemas of the row image, or ``None`` when unknown.

        Args:
            topic: the Kafka topic.
            table: ``<db-or-schema>.<table>`` from the record's source block, when known.
            seen_fields: field names the batch's sampled records carry in their row images; a source that
                caches schemas reads a table again when one of them is missing from what it holds.
        """

    def key_columns(self, topic: str, table: str | None) -> tuple[str, ...] | None:
        """Primary-key column names, or ``None`` when unknown (they are then read from the record key)."""
        return None

    def begin_batch(self) -> None:  # noqa: B027  (a hook: sources without a cache need nothing here)
        """Forget what was read for the previous batch."""

    def close(self) -> None:  # noqa: B027  (a hook: sources without a connection need nothing here)
        """Release what the source holds open (a database connection); it reopens on the next read."""

    def describe(self) -> str:
        """What this source is, for logs and errors."""
        return type(self).__name__


#: Builds the schema source of a run: from the connector spec (None when replaying without one) and the
#: topic prefix (:func:`cdclake.databases.schema_source.schema_source_for`).
SchemaSourceFactory = Callable[["ConnectorSpec | None", str], SchemaSource]


class ConnectSchemaSource(SchemaSource):
    """A schema source fed from Connect schemas or ``{column: type spec}`` dicts, keyed by topic or table.

    Keys are matched against the topic first, then ``<db-or-schema>.<table>``, then the bare table name. Values
    are either a Connect ``Value`` struct schema (``{"type": "struct", "fields": [...]}``, e.g. the ``after`` field
    of a captured schema-on event or derived from the target Iceberg table) or a dict ``column -> spec`` (see
    :func:`column_schema`).

    Args:
        tables: per topic/table, the Connect struct schema or column specs.
        keys: per topic/table, the primary-key column names.
    """

    def __init__(
        self,
        tables: Mapping[str, JsonSchema | Mapping[str, str | JsonSchema] | str],
        *,
        keys: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._tables: dict[str, list[dict[str, Any]]] = {}
        for name, value in tables.items():
            schema = json.loads(value) if isinstance(value, str) else value
            if schema.get(f.SCHEMA_TYPE) == "struct" and isinstance(schema.get(f.SCHEMA_FIELDS), list):
                self._tables[name] = [dict(fld) for fld in schema[f.SCHEMA_FIELDS]]
            else:
                self._tables[name] = [column_schema(col, spec) for col, spec in schema.items()]
        self._keys = {name: tuple(cols) for name, cols in (keys or {}).items()}
        self._origin: str | None = None

    @staticmethod
    def _lookup(mapping: Mapping[str, Any], topic: str, table: str | None) -> Any:
        for candidate in (topic, table, table.rsplit(".", 1)[-1] if table else None):
            if candidate and candidate in mapping:
                return mapping[candidate]
        return None

    @classmethod
    def from_file(cls, path: str | Path) -> ConnectSchemaSource:
        """A schema source from a JSON file: ``{"tables": {name: schema}, "keys": {name: [column, ...]}}``.

        ``name`` is a topic, ``<db-or-schema>.<table>`` or a bare table name; ``schema`` is a Connect struct
        schema or a ``{column: type spec}`` object (see :func:`column_schema`); ``keys`` is optional.

        Raises:
            ConfigError: when the file is missing, is not JSON, or does not have this shape (names the file).
        """
        file = Path(path)
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"schema source file {file} does not exist") from exc
        except (OSError, ValueError) as exc:
            raise ConfigError(f"schema source file {file} is not readable JSON: {exc}") from exc
        tables = raw.get("tables") if isinstance(raw, dict) else None
        keys = raw.get("keys", {}) if isinstance(raw, dict) else None
        if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
            raise ConfigError(
                f'schema source file {file}: expected {{"tables": {{name: schema or {{column: type}}}}, '
                '"keys": {name: [column, ...]}} (see docs/decoding.md)'
            )
        if not isinstance(keys, dict) or not all(isinstance(v, list) for v in keys.values()):
            raise ConfigError(f'schema source file {file}: "keys" must map table names to lists of column names')
        try:
            source = cls(tables, keys=keys)
        except ConnectSchemaError as exc:
            raise ConfigError(f"schema source file {file}: {exc}") from exc
        source._origin = str(file)
        return source

    def row_fields(
        self, topic: str, table: str | None, *, seen_fields: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]] | None:
        found = self._lookup(self._tables, topic, table)
        return None if found is None else [dict(fld) for fld in found]

    def describe(self) -> str:
        return f"schema file {self._origin}" if self._origin else "given Connect schemas"

    def key_columns(self, topic: str, table: str | None) -> tuple[str, ...] | None:
        return self._lookup(self._keys, topic, table)


class NoSchemaSource(SchemaSource):
    """The default: no types known (records of schema-less relational topics are dead-lettered)."""

    def row_fields(
        self, topic: str, table: str | None, *, seen_fields: frozenset[str] = frozenset()
    ) -> list[dict[str, Any]] | None:
        return None

    def describe(self) -> str:
        return "no schema source"
