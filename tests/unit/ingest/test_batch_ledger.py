"""The ledger's typed columns: a ledger from before them is evolved in place, and committed rows carry them; a
capped batch's rows carry the point its cap cut it at, which a redo reads back."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.ledger import BATCH_COLUMNS, COMMITTED, PLANNED, BatchLedger, BatchRecord
from cdclake.ingest.offsets import OffsetRange

pytestmark = pytest.mark.spark

#: ``lake.cdc_audit.batches`` as lakes created before the typed columns have it.
OLD_BATCHES_DDL = """CREATE TABLE {name} (
  source STRING NOT NULL, batch_id STRING NOT NULL, seq BIGINT NOT NULL, status STRING NOT NULL,
  ranges STRING, next_offsets STRING, recorded_at TIMESTAMP, summary STRING
) USING iceberg TBLPROPERTIES ('format-version'='2')"""
OLD_COLUMNS = ["source", "batch_id", "seq", "status", "ranges", "next_offsets", "recorded_at", "summary"]


def test_an_old_ledger_gets_the_typed_columns_and_committed_rows_fill_them(spark: SparkSession, prefix: str) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{prefix}")
    old, fresh = f"lake.{prefix}.old_batches", f"lake.{prefix}.fresh_batches"
    spark.sql(OLD_BATCHES_DDL.format(name=old))
    spark.sql(f"INSERT INTO {old} VALUES ('pg', 'b0', 1, 'committed', '{{}}', '{{}}', current_timestamp(), '{{}}')")
    ledger = BatchLedger(spark, "pg")
    ledger.name = old
    ledger.ensure()
    spark.catalog.refreshTable(old)
    assert spark.table(old).columns == [*OLD_COLUMNS, *(name for name, _ in BATCH_COLUMNS)]
    created = BatchLedger(spark, "pg")
    created.name = fresh
    created.ensure()
    assert spark.table(old).schema == spark.table(fresh).schema  # evolved in place = created today

    items = "pg.inventory.items"
    capped_at = datetime(2026, 1, 1, 12, 0, 0, 250000)  # naive local time, as the job's timestamps
    rec = BatchRecord("pg", "b1", 2, PLANNED, [OffsetRange(items, 0, 0, 5)], {(items, 0): 5}, capped_at=capped_at)
    ledger.append(rec)
    # an interrupted batch is redone with the point its cap cut it at
    _, pending = ledger.last()
    assert pending is not None and (pending.batch_id, pending.capped_at) == ("b1", capped_at)
    summary = {
        "records": 5,
        "dead_lettered": 1,
        "dead_lettered_by_partition": {f"{items}/0": 1},
        "tables": {
            "lake.pg.inventory.items": {
                "decoded": {"c": 4},
                "events": {"c": 3},
                "applied_by_op": {"c": 3},
                "dead_lettered": 1,
            }
        },
        "transactions": {"counts": {"complete": 1, "held": 1, "mismatched": 0, "expired": 0}},
        "phases_s": {"apply": 1.5},
    }
    ledger.append(BatchRecord("pg", "b1", 2, COMMITTED, rec.ranges, {(items, 0): 4}, capped_at=capped_at), summary)

    got = {
        (r["batch_id"], r["status"]): r.asDict(recursive=True)
        for r in spark.sql(f"SELECT * FROM {old}").drop("recorded_at", "summary", "ranges", "next_offsets").collect()
    }
    assert got[("b0", "committed")] == {"source": "pg", "batch_id": "b0", "seq": 1, "status": "committed"} | {
        name: None for name, _ in BATCH_COLUMNS
    }
    planned_range = {"topic": items, "partition": 0, "start_offset": 0, "end_offset": 5, "next_offset": 5}
    assert got[("b1", "planned")]["offset_ranges"] == [planned_range | {"dead_lettered": None}]
    assert got[("b1", "planned")]["capped_at"] == capped_at
    # no counts on a planned row (pyiceberg writes a null list of structs as an empty one)
    assert not got[("b1", "planned")]["table_counts"]
    committed = got[("b1", "committed")]
    assert committed == {
        "source": "pg",
        "batch_id": "b1",
        "seq": 2,
        "status": "committed",
        "records": 5,
        "dead_lettered": 1,
        "offset_ranges": [planned_range | {"next_offset": 4, "dead_lettered": 1}],
        "table_counts": [
            {
                "table": "lake.pg.inventory.items",
                "op": "c",
                "decoded": 4,
                "held": 1,
                "applied": 3,
                "skipped": 0,
                "quarantined": 0,
                "dead_lettered": 0,
            },
            {
                "table": "lake.pg.inventory.items",
                "op": None,
                "decoded": 0,
                "held": 0,
                "applied": 0,
                "skipped": 0,
                "quarantined": 0,
                "dead_lettered": 1,
            },
        ],
        "tx_complete": 1,
        "tx_held": 1,
        "tx_mismatched": 0,
        "tx_expired": 0,
        "phase_seconds": {"apply": 1.5},
        "capped_at": capped_at,
    }
    last, pending = ledger.last()
    assert last is not None and (last.batch_id, last.next_offsets, pending) == ("b1", {(items, 0): 4}, None)
