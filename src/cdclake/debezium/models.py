"""Frozen models of the Debezium wire objects (source block, transaction metadata, schema change events).

Attributes are snake_case; the Debezium wire names are the aliases, so ``Model.model_validate(payload)`` reads
an event payload as emitted. These models are the driver-side (pure Python) view, used to inspect samples and
in tests; the Spark decoding path never builds them per record.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from cdclake.debezium import fields as f
from cdclake.typedef import FrozenModel


class Operation(StrEnum):
    """Debezium ``op`` codes."""

    READ = "r"
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    TRUNCATE = "t"
    MESSAGE = "m"


#: Normalised values of ``source.snapshot`` (``None`` means "not a snapshot event").
SNAPSHOT_VALUES: frozenset[str] = frozenset(
    {"true", "first", "first_in_data_collection", "last_in_data_collection", "last", "incremental"}
)


def normalise_snapshot(value: Any) -> str | None:
    """Normalise ``source.snapshot`` in any of its forms (boolean or string enum).

    Args:
        value: the raw ``source.snapshot`` value (``True``, ``"true"``, ``"last"``, ``False``, ``None``...).

    Returns:
        ``None`` for false/absent, else the lower-case string (``"true"``, ``"first"``, ``"incremental"``...).
    """
    if value is None or value is False:
        return None
    if value is True:
        return "true"
    text = str(value).strip().lower()
    return None if text in ("", "false") else text


class SourceBlock(FrozenModel):
    """The ``source`` block of a change event; the union of the fields of all supported connectors."""

    version: str | None = Field(default=None, alias=f.SRC_VERSION)
    connector: str | None = Field(default=None, alias=f.SRC_CONNECTOR)
    name: str | None = Field(default=None, alias=f.SRC_NAME)
    ts_ms: int | None = Field(default=None, alias=f.SRC_TS_MS)
    ts_us: int | None = Field(default=None, alias=f.SRC_TS_US)
    ts_ns: int | None = Field(default=None, alias=f.SRC_TS_NS)
    snapshot: str | None = Field(default=None, alias=f.SRC_SNAPSHOT)
    db: str | None = Field(default=None, alias=f.SRC_DB)
    schema_: str | None = Field(default=None, alias=f.SRC_SCHEMA)
    table: str | None = Field(default=None, alias=f.SRC_TABLE)
    sequence: str | None = Field(default=None, alias=f.SRC_SEQUENCE)
    tx_id: str | None = Field(default=None, alias=f.SRC_TX_ID)
    lsn: int | None = Field(default=None, alias=f.SRC_LSN)
    server_id: int | None = Field(default=None, alias=f.SRC_SERVER_ID)
    gtid: str | None = Field(default=None, alias=f.SRC_GTID)
    file: str | None = Field(default=None, alias=f.SRC_FILE)
    pos: int | None = Field(default=None, alias=f.SRC_POS)
    row: int | None = Field(default=None, alias=f.SRC_ROW)
    rs: str | None = Field(default=None, alias=f.SRC_RS)
    collection: str | None = Field(default=None, alias=f.SRC_COLLECTION)
    ord: int | None = Field(default=None, alias=f.SRC_ORD)
    h: int | None = Field(default=None, alias=f.SRC_H)
    commit_lsn: str | None = Field(default=None, alias=f.SRC_COMMIT_LSN)
    change_lsn: str | None = Field(default=None, alias=f.SRC_CHANGE_LSN)
    begin_lsn: str | None = Field(default=None, alias=f.SRC_BEGIN_LSN)

    @field_validator("snapshot", mode="before")
    @classmethod
    def _snapshot(cls, value: Any) -> str | None:
        return normalise_snapshot(value)

    @field_validator("tx_id", "commit_lsn", "change_lsn", "begin_lsn", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> str | None:
        return None if value is None else str(value)

    @property
    def table_name(self) -> str | None:
        """``table``, or ``collection`` for MongoDB."""
        return self.table or self.collection


class TransactionBlock(FrozenModel):
    """The ``transaction`` block of a data change event (``provide.transaction.metadata=true``)."""

    id: str = Field(alias=f.TX_ID)
    total_order: int = Field(alias=f.TX_TOTAL_ORDER)
    data_collection_order: int = Field(alias=f.TX_DATA_COLLECTION_ORDER)


class TransactionStatus(StrEnum):
    """Status of a transaction metadata event."""

    BEGIN = "BEGIN"
    END = "END"


class DataCollectionEventCount(FrozenModel):
    """One entry of ``data_collections`` in a transaction END event."""

    data_collection: str = Field(alias=f.TX_DATA_COLLECTION)
    event_count: int = Field(alias=f.TX_EVENT_COUNT)


class TransactionEvent(FrozenModel):
    """A BEGIN or END event of the ``<prefix>.transaction`` topic."""

    status: TransactionStatus = Field(alias=f.TX_STATUS)
    id: str = Field(alias=f.TX_ID)
    ts_ms: int | None = Field(default=None, alias=f.TS_MS)
    event_count: int | None = Field(default=None, alias=f.TX_EVENT_COUNT)
    data_collections: tuple[DataCollectionEventCount, ...] | None = Field(default=None, alias=f.TX_DATA_COLLECTIONS)


class SchemaChangeEvent(FrozenModel):
    """A record of the schema change topic (MySQL/MariaDB/Informix), named ``<prefix>``."""

    source: SourceBlock | None = Field(default=None, alias=f.SOURCE)
    ts_ms: int | None = Field(default=None, alias=f.TS_MS)
    database_name: str | None = Field(default=None, alias=f.SC_DATABASE_NAME)
    schema_name: str | None = Field(default=None, alias=f.SC_SCHEMA_NAME)
    ddl: str | None = Field(default=None, alias=f.SC_DDL)
    table_changes: tuple[dict[str, Any], ...] = Field(default=(), alias=f.SC_TABLE_CHANGES)

    @field_validator("table_changes", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return () if value is None else value
