"""What the job needs to know about a source: from its connector spec, or inferred from replayed records."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdclake.connectors.spec import ConnectorSpec, LakeMode, LakeOptions, SchemaPolicy
from cdclake.decode.options import DecodeOptions, TableId
from cdclake.decode.schema_source import NoSchemaSource, SchemaSource
from cdclake.exceptions import ConfigError
from cdclake.ingest.offsets import GapAcceptance
from cdclake.settings import settings


@dataclass(frozen=True)
class SourceConfig:
    """A captured source as the ingestion job sees it.

    Attributes:
        name: source id (the spec's ``name``; the topic prefix when replaying without a spec).
        topic_prefix: Debezium ``topic.prefix``.
        key_schemas: ``key.converter.schemas.enable``.
        value_schemas: ``value.converter.schemas.enable``.
        tables: lake options per data collection (``schema.table`` / ``db.table``).
        signal_tables: signaling tables (their rows are skipped).
        transaction_consistent: apply only complete transactions (when the connector provides
            transaction metadata; see :mod:`cdclake.ingest.transactions`).
        schema_source: where column types come from when value schemas are off (see
            :func:`cdclake.databases.schema_source.spec_schema_source`; default: none, so schema-less records
            of relational topics are dead-lettered).
        max_incomplete_age_s: seconds after which a still-incomplete transaction is applied and reported
            (default: ``CDC_TX_MAX_INCOMPLETE_AGE_S`` of :func:`cdclake.settings.settings` when the config is
            built, 600 when unset).
        accept_gaps: the gaps in Kafka's logs this run accepts (``--accept-gap``): those topic-partitions start
            at their log start, and the batch records them. Default none: a gap stops the batch before anything
            is read (:func:`cdclake.ingest.offsets.plan_ranges`).
        max_record_bytes: a record value longer than this is an ``oversized_record`` dead letter (default:
            ``CDC_MAX_RECORD_BYTES``, 64 MiB).
    """

    name: str
    topic_prefix: str
    key_schemas: bool = True
    value_schemas: bool = True
    tables: dict[str, LakeOptions] = field(default_factory=dict)
    signal_tables: frozenset[str] = frozenset()
    transaction_consistent: bool = True
    schema_source: SchemaSource = field(default_factory=NoSchemaSource)
    max_incomplete_age_s: float = field(default_factory=lambda: settings().tx_max_incomplete_age_s)
    max_record_bytes: int = field(default_factory=lambda: settings().max_record_bytes)
    accept_gaps: GapAcceptance = field(default_factory=GapAcceptance)

    @classmethod
    def from_spec(
        cls,
        spec: ConnectorSpec,
        *,
        schema_source: SchemaSource | None = None,
        accept_gaps: GapAcceptance | None = None,
    ) -> SourceConfig:
        """The source of a spec; ``schema_source`` is required when the spec's value schemas are off;
        ``accept_gaps``: the gaps in Kafka's logs the run accepts (default none).

        Raises:
            ConfigError: when value schemas are off and no schema source is given.
        """
        if spec.needs_schema_source and schema_source is None:
            raise ConfigError(
                f"spec {spec.name}: value schemas are off (converters.value_schemas_enable: false), so the job "
                "needs a schema source: build it with cdclake.databases.schema_source.spec_schema_source(spec)"
            )
        return cls(
            name=spec.name,
            topic_prefix=spec.topic_prefix,
            key_schemas=spec.converters.key_schemas_enable,
            value_schemas=spec.converters.value_schemas_enable,
            tables={t.name: t.lake for t in spec.tables},
            signal_tables=frozenset({spec.signal_table}),
            transaction_consistent=spec.transaction_metadata,
            schema_source=schema_source or NoSchemaSource(),
            accept_gaps=accept_gaps or GapAcceptance(),
        )

    def lake_options(self, table_id: TableId) -> LakeOptions:
        """Options of a decoded table (defaults: upsert, evolve, unpartitioned)."""
        for name in (f"{table_id.namespace}.{table_id.table}", table_id.table):
            if name in self.tables:
                return self.tables[name]
        return LakeOptions(mode=LakeMode.UPSERT, schema_policy=SchemaPolicy.EVOLVE)

    def decode_options(self) -> DecodeOptions:
        return DecodeOptions(
            key_schemas_enabled=self.key_schemas,
            value_schemas_enabled=self.value_schemas,
            topic_prefix=self.topic_prefix,
            schema_source=self.schema_source,
            signal_tables=self.signal_tables,
            include_before=False,  # the lake keeps after-images only (MongoDB's before document is kept anyway)
            # only append-mode tables store the raw key (tables not in the spec are upserted)
            include_key=any(options.mode == LakeMode.APPEND for options in self.tables.values()),
            max_record_bytes=self.max_record_bytes,
        )
