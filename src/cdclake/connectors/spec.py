"""Declarative connector specs: one YAML file per source database under ``include/connectors/``.

The models here are frozen pydantic models. They check each field on its own (types, enums,
syntax); rules that involve several fields (table names against the connector kind, snapshot
modes, ``extra`` against generated keys) live in :mod:`cdclake.connectors.loader`, which reports
every problem with the file name and the key path.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cdclake.connectors import properties as p

CONFIG_PROVIDER_REFERENCE = re.compile(r"^\$\{[A-Za-z][A-Za-z0-9_-]*:[^{}]+\}$")
"""A Kafka Connect config-provider reference such as ``${env:VAR}`` or ``${file:/path:key}``."""

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PARTITION_UNARY = re.compile(rf"^(identity|year|month|day|hour)\(\s*({_IDENT})\s*\)$")
_PARTITION_BINARY = re.compile(rf"^(bucket|truncate)\(\s*(\d+)\s*,\s*({_IDENT})\s*\)$")
_PARTITION_BARE = re.compile(rf"^({_IDENT})$")


class ConnectorKind(StrEnum):
    """The Debezium connector a spec uses (the spec's ``connector`` key)."""

    POSTGRESQL = "postgresql"
    MYSQL = "mysql"
    MARIADB = "mariadb"
    MONGODB = "mongodb"
    INFORMIX = "informix"


CONNECTOR_CLASSES: dict[ConnectorKind, str] = {
    ConnectorKind.POSTGRESQL: "io.debezium.connector.postgresql.PostgresConnector",
    ConnectorKind.MYSQL: "io.debezium.connector.mysql.MySqlConnector",
    ConnectorKind.MARIADB: "io.debezium.connector.mariadb.MariaDbConnector",
    ConnectorKind.MONGODB: "io.debezium.connector.mongodb.MongoDbConnector",
    ConnectorKind.INFORMIX: "io.debezium.connector.informix.InformixConnector",
}

DEFAULT_PORTS: dict[ConnectorKind, int] = {
    ConnectorKind.POSTGRESQL: 5432,
    ConnectorKind.MYSQL: 3306,
    ConnectorKind.MARIADB: 3306,
    ConnectorKind.MONGODB: 27017,
    ConnectorKind.INFORMIX: 9088,
}

_COMMON_SNAPSHOT_MODES = frozenset(
    {"always", "initial", "initial_only", "no_data", "when_needed", "configuration_based", "custom"}
)
SNAPSHOT_MODES: dict[ConnectorKind, frozenset[str]] = {
    ConnectorKind.POSTGRESQL: _COMMON_SNAPSHOT_MODES,
    ConnectorKind.MYSQL: _COMMON_SNAPSHOT_MODES | {"recovery"},
    ConnectorKind.MARIADB: _COMMON_SNAPSHOT_MODES | {"recovery"},
    ConnectorKind.MONGODB: _COMMON_SNAPSHOT_MODES,
    ConnectorKind.INFORMIX: _COMMON_SNAPSHOT_MODES | {"recovery"},
}
"""Debezium 3.x ``snapshot.mode`` values per connector (the old ``schema_only*`` names are gone)."""

DATA_COLLECTION_PARTS: dict[ConnectorKind, int] = {
    ConnectorKind.POSTGRESQL: 2,  # schema.table
    ConnectorKind.MYSQL: 2,  # database.table
    ConnectorKind.MARIADB: 2,  # database.table
    ConnectorKind.MONGODB: 2,  # database.collection
    ConnectorKind.INFORMIX: 3,  # database.owner.table
}
"""How many dot-separated parts a Debezium data-collection name has for each connector."""


class LakeMode(StrEnum):
    """How change events land in the Iceberg table."""

    UPSERT = "upsert"
    APPEND = "append"
    SCD2 = "scd2"


class SchemaPolicy(StrEnum):
    """What the lake job does when the source schema changes."""

    EVOLVE = "evolve"
    FAIL = "fail"
    QUARANTINE = "quarantine"


class SignalChannel(StrEnum):
    """Debezium signal channels the spec enables (``signal.enabled.channels``)."""

    SOURCE = "source"
    KAFKA = "kafka"


class _SpecModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class PartitionField(_SpecModel):
    """One parsed Iceberg partition transform, e.g. ``bucket(16, id)``."""

    transform: str
    column: str
    width: int | None = None

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return f"{self.transform}({self.column})"


def parse_partition(expr: str) -> PartitionField:
    """Parse one partition expression (``identity|year|month|day|hour(col)``, ``bucket|truncate(N, col)``, ``col``).

    Raises:
        ValueError: when the expression is not one of the supported forms.
    """
    text = expr.strip()
    if m := _PARTITION_UNARY.match(text):
        return PartitionField(transform=m.group(1), column=m.group(2))
    if m := _PARTITION_BINARY.match(text):
        width = int(m.group(2))
        if width <= 0:
            raise ValueError(f"{expr!r}: the width of {m.group(1)} must be a positive integer")
        return PartitionField(transform=m.group(1), column=m.group(3), width=width)
    if m := _PARTITION_BARE.match(text):
        return PartitionField(transform="identity", column=m.group(1))
    raise ValueError(
        f"{expr!r} is not a partition transform; use identity(col), year|month|day|hour(col), "
        "bucket(N, col) or truncate(N, col)"
    )


TOMBSTONE_RETENTION_DAYS_DEFAULT = 7.0
"""How long an upsert table keeps a deleted key's tombstone (``<table>__cdc_deletes``), by ingest time."""


class LakeOptions(_SpecModel):
    """Per-table options for the Iceberg side.

    ``tombstone_retention_days``: upsert tables only; the maintenance job deletes tombstones recorded
    more than this many days ago (a late event older than a delete can resurrect the row only after
    that). ``None`` keeps them forever.
    """

    mode: LakeMode = LakeMode.UPSERT
    schema_policy: SchemaPolicy = SchemaPolicy.EVOLVE
    partitioning: tuple[str, ...] = ()
    tombstone_retention_days: Annotated[float | None, Field(ge=0)] = TOMBSTONE_RETENTION_DAYS_DEFAULT

    @field_validator("partitioning")
    @classmethod
    def _check_partitioning(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for expr in value:
            parse_partition(expr)
        return value

    def partition_fields(self) -> list[PartitionField]:
        """The ``partitioning`` entries, parsed."""
        return [parse_partition(expr) for expr in self.partitioning]


class TableSpec(_SpecModel):
    """One captured table: its Debezium data-collection name and its lake options."""

    name: Annotated[str, Field(min_length=3)]
    lake: LakeOptions = LakeOptions()


class SchemaSourceKind(StrEnum):
    """Where the ingestion job takes column types from when records carry no schema (``converters.schema_source``)."""

    DATABASE = "database"
    LAKE = "lake"


class ConverterOptions(_SpecModel):
    """JsonConverter settings of the connector (whether records carry the ``schema`` envelope).

    ``schema_source`` says where the ingestion job takes the column types from when value schemas are off:
    ``database`` (the default: the source database's own catalog, through the spec's reader connection),
    ``lake`` (the existing Iceberg tables' schemas), or the path of a JSON file in the format of
    :class:`cdclake.decode.ConnectSchemaSource` (relative paths are taken from the spec file's folder). It is
    not used while value schemas are on.
    """

    key_schemas_enable: bool = True
    value_schemas_enable: bool = True
    schema_source: Annotated[str, Field(min_length=1)] = SchemaSourceKind.DATABASE.value

    @field_validator("schema_source")
    @classmethod
    def _schema_source_kind_or_file(cls, value: str) -> str:
        if value in set(SchemaSourceKind) or value.lower().endswith(".json"):
            return value
        raise ValueError(
            f"must be {', '.join(repr(k.value) for k in SchemaSourceKind)} or the path of a JSON schema file "
            f"(*.json), got {value!r}"
        )


ExtraValue = str | int | float | bool


#: Suffix of a spec's reader connection id (:attr:`ConnectorSpec.reader_connection_id`).
READER_CONNECTION_SUFFIX = "_reader"


class ConnectorSpec(_SpecModel):
    """A validated connector spec. Build it with :func:`cdclake.connectors.load_spec`, not directly.

    ``source_path`` is the YAML file it came from (used in error messages); it is not part of the spec.
    """

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=60)]
    connector: ConnectorKind
    connection_id: Annotated[str, Field(min_length=1)]
    capture_user: Annotated[str, Field(min_length=1)]
    capture_password: str
    topic_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")]
    database: Annotated[str, Field(min_length=1)]
    schema_name: str | None = Field(default=None, alias="schema")
    tables: Annotated[tuple[TableSpec, ...], Field(min_length=1)]
    snapshot_mode: str = p.SNAPSHOT_MODE_DEFAULT
    signal_table: str
    signal_channels: tuple[SignalChannel, ...] = (SignalChannel.SOURCE, SignalChannel.KAFKA)
    signal_kafka_topic: str | None = None
    transaction_metadata: bool = True
    notifications: bool = True
    heartbeat_interval_ms: Annotated[int, Field(ge=0)] = p.HEARTBEAT_INTERVAL_MS_DEFAULT
    poll_interval_ms: Annotated[int, Field(ge=1)] = p.POLL_INTERVAL_MS_DEFAULT
    errors_max_retries: Annotated[int, Field(ge=-1)] = p.ERRORS_MAX_RETRIES_DEFAULT
    converters: ConverterOptions = ConverterOptions()
    extra: dict[str, ExtraValue] = Field(default_factory=dict)
    extra_overrides: tuple[str, ...] = ()
    kafka_bootstrap_servers: Annotated[str, Field(min_length=1)] = p.KAFKA_BOOTSTRAP_SERVERS_DEFAULT
    connector_name: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9._-]+$")] = None
    server_id: Annotated[int | None, Field(ge=1, le=4_294_967_295)] = None
    slot_name: Annotated[str | None, Field(pattern=r"^[a-z0-9_]{1,63}$")] = None
    publication_name: Annotated[str | None, Field(pattern=r"^[a-z_][a-z0-9_]{0,62}$")] = None
    connection_options: dict[str, str] = Field(default_factory=dict)
    source_path: Path | None = Field(default=None, exclude=True)

    @field_validator("tables", mode="before")
    @classmethod
    def _tables_from_strings(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("capture_password")
    @classmethod
    def _password_is_reference(cls, value: str) -> str:
        if not CONFIG_PROVIDER_REFERENCE.match(value):
            raise ValueError(
                "must be a Kafka Connect config-provider reference such as "
                "${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}; literal passwords are not allowed in connector specs"
            )
        return value

    # ---- derived names -------------------------------------------------------------------------

    @property
    def connect_name(self) -> str:
        """Name of the connector on the Kafka Connect cluster (``connector_name``, default ``name``)."""
        return self.connector_name or self.name

    @property
    def reader_connection_id(self) -> str:
        """The Airflow connection that may read the captured tables: ``<connection_id>_reader``.

        ``connection_id`` is the signal writer, which can only insert signal rows; row counts and
        source-vs-lake reconciliations read the tables through this one (``SELECT`` on them, nothing else).
        """
        return self.connection_id + READER_CONNECTION_SUFFIX

    @property
    def needs_schema_source(self) -> bool:
        """Whether the ingestion job needs a schema source: value schemas off, and not MongoDB (its documents
        decode without one)."""
        return not self.converters.value_schemas_enable and self.connector is not ConnectorKind.MONGODB

    @property
    def schema_source_file(self) -> Path | None:
        """The JSON schema file ``converters.schema_source`` names (relative to the spec's folder), or None."""
        value = self.converters.schema_source
        if value in set(SchemaSourceKind):
            return None
        path = Path(value).expanduser()
        if not path.is_absolute() and self.source_path is not None:
            path = self.source_path.parent / path
        return path

    @property
    def connector_class(self) -> str:
        """The Debezium ``connector.class``."""
        return CONNECTOR_CLASSES[self.connector]

    @property
    def table_names(self) -> tuple[str, ...]:
        """Data-collection names of the captured tables, without the signal table."""
        return tuple(t.name for t in self.tables)

    @property
    def captured_collections(self) -> tuple[str, ...]:
        """Every data collection the connector captures: the tables plus the signal table."""
        names = self.table_names
        return names if self.signal_table in names else (*names, self.signal_table)

    @property
    def signal_topic(self) -> str:
        """Kafka signal-channel topic (``signal_kafka_topic``, default ``<prefix>-signal``)."""
        return self.signal_kafka_topic or self.topic_prefix + p.SIGNAL_TOPIC_SUFFIX

    @property
    def notification_topic(self) -> str:
        """Topic the ``sink`` notification channel writes to."""
        return self.topic_prefix + p.NOTIFICATION_TOPIC_SUFFIX

    @property
    def transaction_topic(self) -> str:
        """Topic of the transaction BEGIN/END events."""
        return self.topic_prefix + p.TRANSACTION_TOPIC_SUFFIX

    @property
    def schema_history_topic(self) -> str:
        """Internal schema-history topic (binlog connectors and Informix only; never consume it)."""
        return self.topic_prefix + p.SCHEMA_HISTORY_TOPIC_SUFFIX

    @property
    def schema_change_topic(self) -> str | None:
        """Schema change topic for consumers (``<prefix>``), or None when the connector has none."""
        return self.topic_prefix if self.has_schema_history else None

    @property
    def heartbeat_topic(self) -> str:
        """Heartbeat topic (``__debezium-heartbeat.<prefix>``)."""
        return p.HEARTBEAT_TOPIC_PREFIX + self.topic_prefix

    @property
    def has_schema_history(self) -> bool:
        """Whether the connector keeps a schema-history topic (MySQL, MariaDB, Informix)."""
        return self.connector in (ConnectorKind.MYSQL, ConnectorKind.MARIADB, ConnectorKind.INFORMIX)

    def topic_for(self, data_collection: str) -> str:
        """Kafka topic of a captured data collection.

        Informix topics leave out the database (``<prefix>.<owner>.<table>``); the others are
        ``<prefix>.<data collection>``.
        """
        parts = data_collection.split(".")
        if self.connector is ConnectorKind.INFORMIX and len(parts) == 3:
            parts = parts[1:]
        return ".".join([self.topic_prefix, *parts])

    def table(self, data_collection: str) -> TableSpec:
        """Return the table spec of a data collection.

        Raises:
            KeyError: when the spec does not capture it.
        """
        for t in self.tables:
            if t.name == data_collection:
                return t
        raise KeyError(f"{self.describe()}: no table {data_collection!r}; known: {', '.join(self.table_names)}")

    def describe(self) -> str:
        """Where this spec came from, for messages: its file path, or ``spec <name>``."""
        return str(self.source_path) if self.source_path else f"spec {self.name}"
