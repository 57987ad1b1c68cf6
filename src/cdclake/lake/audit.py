"""The ``lake.cdc_audit`` tables: what each holds, who writes it, and the one way rows are written once.

========================  ===========================================  ==========================================
table                     rows                                         written by
========================  ===========================================  ==========================================
``batches``               the ledger: one PLANNED and one COMMITTED    :mod:`cdclake.ingest.ledger`
                          row per batch, offsets and summary
``dead_letters``          records that could not be decoded, raw       :mod:`cdclake.ingest.batch.audit`
``transactions``          per transaction: END counts against what     :mod:`cdclake.ingest.batch.audit`
                          was decoded and applied, and its status
``schema_changes``        DDL seen on schema-change topics             :mod:`cdclake.ingest.batch.audit`
``quarantine``            held records of quarantined tables, raw      :mod:`cdclake.ingest.batch.apply`
``quarantine_releases``   release requests and their outcomes          ``cdclake quarantine release``;
                                                                       :mod:`cdclake.ingest.batch.apply`
``locks``                 one lease per source                         :mod:`cdclake.ingest.lock`
``reconciliation``        source-vs-lake verdicts per table            :mod:`cdclake.reconcile.audit`
========================  ===========================================  ==========================================

Written once: a write of a batch is one Iceberg commit whose snapshot summary carries ``cdc.batch-id`` set
to the write's id (the batch id, or the batch id and the table for a per-table write). When a batch is redone
after a crash, a write whose id a snapshot of the table already carries is skipped (:func:`written`). A few
rows go through pyiceberg (:func:`append_rows`, tens of milliseconds); record frames through Spark
(:func:`append_frame`). The tables of this module are created with their Spark DDL on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdclake.lake import rows as lake_rows
from cdclake.lake.catalog import AUDIT_NAMESPACE, CATALOG_NAME
from cdclake.sql import quote_identifier, quote_name

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

BATCHES = "batches"
LOCKS = "locks"
RECONCILIATION = "reconciliation"

#: The snapshot-summary property naming the write a commit belongs to.
WRITE_ID = "cdc.batch-id"

_HEADERS = "ARRAY<STRUCT<key: STRING, value: BINARY>>"


@dataclass(frozen=True)
class AuditTable:
    """One audit table written by the batch: its name and Spark SQL columns."""

    name: str
    columns: tuple[tuple[str, str], ...]

    @property
    def identifier(self) -> str:
        """``lake.cdc_audit.<name>``, as reported to users."""
        return f"{CATALOG_NAME}.{AUDIT_NAMESPACE}.{self.name}"

    @property
    def sql_name(self) -> str:
        """Quoted Spark SQL name, e.g. ```lake`.`cdc_audit`.`dead_letters```."""
        return quote_name((CATALOG_NAME, AUDIT_NAMESPACE, self.name))

    def ddl(self) -> str:
        columns = ", ".join(f"{quote_identifier(name)} {kind}" for name, kind in self.columns)
        properties = {"format-version": "2", **lake_rows.APPEND_TABLE_PROPERTIES}
        listed = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
        return f"CREATE TABLE IF NOT EXISTS {self.sql_name} ({columns}) USING iceberg TBLPROPERTIES ({listed})"

    def ensure(self, spark: SparkSession) -> str:
        """Create the table (and the namespace) if missing, add the columns it lacks; returns its SQL name."""
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG_NAME}.{AUDIT_NAMESPACE}")
        spark.sql(self.ddl())
        present = {f.name for f in spark.table(self.sql_name).schema.fields}
        missing = [(n, t) for n, t in self.columns if n not in present]
        if missing:
            added = ", ".join(f"{quote_identifier(n)} {t}" for n, t in missing)
            spark.sql(f"ALTER TABLE {self.sql_name} ADD COLUMNS ({added})")
        return self.sql_name


DEAD_LETTERS = AuditTable(
    "dead_letters",
    (
        ("source", "STRING"),
        ("batch_id", "STRING"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("offset", "BIGINT"),
        ("key", "STRING"),
        ("value", "STRING"),
        ("reason", "STRING"),
        ("recorded_at", "TIMESTAMP"),
    ),
)
TRANSACTIONS = AuditTable(
    "transactions",
    (
        ("source", "STRING"),
        ("batch_id", "STRING"),
        ("tx_id", "STRING"),
        ("data_collection", "STRING"),
        ("expected", "BIGINT"),
        ("applied", "BIGINT"),
        ("seen", "BIGINT"),
        ("status", "STRING"),
        ("end_seen", "BOOLEAN"),
        ("recorded_at", "TIMESTAMP"),
    ),
)
SCHEMA_CHANGES = AuditTable(
    "schema_changes",
    (
        ("source", "STRING"),
        ("batch_id", "STRING"),
        ("table", "STRING"),
        ("kind", "STRING"),
        ("detail", "STRING"),
        ("ddl", "STRING"),
        ("position", "STRING"),
        ("recorded_at", "TIMESTAMP"),
    ),
)
#: Held records: the raw Kafka record (key, value, timestamp, headers) and why its table is quarantined.
QUARANTINE = AuditTable(
    "quarantine",
    (
        ("source", "STRING"),
        ("batch_id", "STRING"),
        ("table", "STRING"),
        ("topic", "STRING"),
        ("partition", "INT"),
        ("offset", "BIGINT"),
        ("key", "STRING"),
        ("value", "STRING"),
        ("reason", "STRING"),
        ("recorded_at", "TIMESTAMP"),
        ("timestamp", "TIMESTAMP"),
        ("headers", _HEADERS),
    ),
)
RELEASES = AuditTable(
    "quarantine_releases",
    (
        ("source", "STRING"),
        ("table", "STRING"),
        ("release_id", "STRING"),
        ("action", "STRING"),
        ("status", "STRING"),
        ("batch_id", "STRING"),
        ("records", "BIGINT"),
        ("released_batches", "ARRAY<STRING>"),
        ("detail", "STRING"),
        ("recorded_at", "TIMESTAMP"),
    ),
)


def written(spark: SparkSession, table: AuditTable, write_id: str) -> bool:
    """True when a snapshot of ``table`` carries ``write_id`` (the write was made before a crash)."""
    existing = lake_rows.load(spark, table.sql_name)
    return existing is not None and lake_rows.committed_by(existing, write_id)


def append_rows(
    spark: SparkSession,
    table: AuditTable,
    rows: Sequence[Mapping[str, Any]],
    write_id: str,
    *,
    redo: bool,
    more: pa.Table | None = None,
) -> None:
    """Append ``rows`` and ``more`` (``recorded_at`` set to now) in one commit, unless ``redo`` and already
    written: a snapshot carries ``write_id`` or, once :func:`cdclake.lake.rows.tidy_snapshots` expired it, rows of
    the table have ``write_id`` as their ``batch_id`` (the batch's id: the only write of this table that carries
    it)."""
    if not rows and (more is None or not more.num_rows):
        return
    existing = lake_rows.load(spark, table.sql_name)
    if existing is None:
        table.ensure(spark)
    elif redo and (lake_rows.committed_by(existing, write_id) or lake_rows.holds_batch(existing, write_id)):
        return
    lake_rows.append_rows(spark, table.sql_name, rows, batch_id=write_id, recorded_at=True, more=more)


def append_frame(spark: SparkSession, table: AuditTable, frame: DataFrame, write_id: str, *, redo: bool) -> bool:
    """Append ``frame`` in one commit, unless ``redo`` and already written; returns whether it wrote."""
    table.ensure(spark)
    if redo and written(spark, table, write_id):
        return False
    frame.writeTo(table.sql_name).option(f"snapshot-property.{WRITE_ID}", write_id).append()
    return True


def applied_transactions(spark: SparkSession, source: str, tx_ids: Sequence[str], *, except_batch: str) -> set[str]:
    """Those of ``tx_ids`` a batch of ``source`` other than ``except_batch`` applied (its ``transactions`` rows
    with a status other than ``held``), read through pyiceberg: the scan's filter on ``source`` and ``tx_id``
    prunes the data files by their column bounds."""
    from pyiceberg.expressions import And, EqualTo, In, NotEqualTo

    if not tx_ids:
        return set()
    table = lake_rows.load(spark, TRANSACTIONS.sql_name)
    if table is None:
        return set()
    found = table.scan(
        row_filter=And(
            EqualTo("source", source),
            In("tx_id", set(tx_ids)),
            NotEqualTo("status", "held"),
            NotEqualTo("batch_id", except_batch),
        ),
        selected_fields=("tx_id",),
    ).to_arrow()
    return set(found.column("tx_id").to_pylist())
