"""Options of :func:`cdclake.decode.decode_records` and the :class:`TableId` of decoded tables."""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from cdclake.decode.schema_source import NoSchemaSource, SchemaSource
from cdclake.typedef import FrozenModel


class RecordFormat(StrEnum):
    """Kafka Connect converter of keys and values. Only JSON is implemented; Avro + registry is reserved."""

    JSON = "json"
    AVRO = "avro"


class TableId(FrozenModel):
    """A captured table: (topic prefix / server name, database-or-schema, table or collection)."""

    server: str | None = None
    namespace: str | None = None
    table: str

    @property
    def name(self) -> str:
        """Dotted name of the non-empty parts, e.g. ``dbserver1.inventory.customers``."""
        return ".".join(p for p in (self.server, self.namespace, self.table) if p)


#: Default of :attr:`DecodeOptions.max_record_bytes`: 64 MiB.
DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024


class DecodeOptions(FrozenModel):
    """How records were serialised and what to skip.

    Attributes:
        key_format: converter of record keys (``json``).
        value_format: converter of record values (``json``).
        key_schemas_enabled: ``key.converter.schemas.enable``.
        value_schemas_enabled: ``value.converter.schemas.enable``.
        topic_prefix: Debezium ``topic.prefix``; inferred from the records when ``None``.
        schema_source: column types when value schemas are disabled.
        signal_tables: signal tables to skip, as ``<db-or-schema>.<table>`` or bare table names.
        include_before: add the decoded ``_cdc_before`` struct to table rows.
        include_key: add the record's raw key text as ``_cdc_key`` (append-mode tables store it; it is most of
            a decoded row's size with key schemas on, so the ingestion job leaves it out when no table keeps it).
        max_record_bytes: a record value longer than this is an ``oversized_record`` dead letter, and never
            parsed (default :data:`DEFAULT_MAX_RECORD_BYTES`; Kafka's own limit, ``message.max.bytes``, is 1 MiB
            unless raised).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    key_format: RecordFormat = RecordFormat.JSON
    value_format: RecordFormat = RecordFormat.JSON
    key_schemas_enabled: bool = True
    value_schemas_enabled: bool = True
    topic_prefix: str | None = None
    schema_source: SchemaSource = Field(default_factory=NoSchemaSource)
    signal_tables: frozenset[str] = frozenset()
    include_before: bool = True
    include_key: bool = True
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, gt=0)
