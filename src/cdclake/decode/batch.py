"""The result of :func:`cdclake.decode.decode_records`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.decode.options import TableId

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class TableInfo:
    """What the ingestion job needs to know about one decoded table.

    Attributes:
        table_id: the table.
        connector: ``source.connector`` of its events.
        topics: Kafka topics it was read from.
        key_columns: primary-key column names (from the key schema).
        schema: Spark schema of the data columns; each field's metadata holds ``cdc.connect.type``,
            ``cdc.logical.type`` (Debezium/Connect logical name) and ``cdc.parameters``.
        schema_versions: number of distinct Connect value schemas seen in the batch (merged by name).
    """

    table_id: TableId
    connector: str
    topics: tuple[str, ...]
    key_columns: tuple[str, ...]
    schema: StructType
    schema_versions: int = 1


@dataclass
class DecodedBatch:
    """Decoded change rows per table plus the side outputs of one batch of Kafka records.

    Attributes:
        tables: change rows per table (data columns then ``_cdc_*`` metadata columns, see docs/decoding.md).
        table_info: per table, key columns and the typed schema with logical-type metadata.
        transactions: BEGIN/END events of ``<prefix>.transaction`` topics.
        schema_changes: events of the schema change topic (MySQL/MariaDB/Informix).
        dead_letters: undecodable records: ``topic, partition, offset, key, value, reason``.
        schema_cuts: per (topic, partition), the offset of the first record whose Connect schema changed a
            column's type incompatibly with the earlier records of the batch (e.g. string -> int). Those
            records and everything after them in the partition are left out of ``tables`` (not dead-lettered):
            the caller must not apply or commit past the cut, so the next batch starts at the new schema.
        schema_cut_reasons: per table name, why its topic was cut (column, old and new type, offset).
    """

    tables: dict[TableId, DataFrame]
    table_info: dict[TableId, TableInfo]
    transactions: DataFrame
    schema_changes: DataFrame
    dead_letters: DataFrame
    _static_counts: dict[str, int] = field(default_factory=dict)
    _signal_frames: list[DataFrame] = field(default_factory=list)
    schema_cuts: dict[tuple[str, int], int] = field(default_factory=dict)
    schema_cut_reasons: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Count every category (runs small Spark jobs).

        Returns:
            ``data:<table name>:<op>`` per table and op, ``data`` (all change rows), ``tombstones``,
            ``heartbeats``, ``notifications_skipped``, ``schema_history_skipped``, ``signals_skipped``,
            ``watermarks_skipped``, ``transactions``, ``schema_changes``, ``dead_letters``.
        """
        out = dict(self._static_counts)
        total = 0
        for table_id, frame in self.tables.items():
            for row in frame.groupBy("_cdc_op").count().collect():
                out[f"data:{table_id.name}:{row['_cdc_op']}"] = int(row["count"])
                total += int(row["count"])
        out["data"] = total
        signals = watermarks = 0
        for frame in self._signal_frames:
            row = frame.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("_watermark").cast("long")).alias("w")).collect()[
                0
            ]
            watermarks += int(row["w"] or 0)
            signals += int(row["n"] or 0) - int(row["w"] or 0)
        out["signals_skipped"] = signals
        out["watermarks_skipped"] = watermarks
        out["transactions"] = self.transactions.count()
        out["schema_changes"] = self.schema_changes.count()
        out["dead_letters"] = self.dead_letters.count()
        return out
