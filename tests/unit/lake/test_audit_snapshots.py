"""The audit tables written through pyiceberg (ledger, transactions) keep few snapshots and merged manifests, and
lose nothing by it; the ledger's reads skip the batches already seen (the session's embedded lake).

Every pyiceberg commit copies the table's snapshot list: without the tidy-up, a follower's commits to these
tables would cost more batch after batch.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchLedger, BatchRecord
from cdclake.lake import audit
from cdclake.lake import rows as lake_rows

pytestmark = pytest.mark.spark


@pytest.fixture
def few_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lake_rows, "TIDY_AFTER_SNAPSHOTS", 4)
    monkeypatch.setattr(lake_rows, "KEEP_SNAPSHOTS", 2)


def _tx_row(source: str, batch_id: str) -> dict[str, Any]:
    return {
        "source": source,
        "batch_id": batch_id,
        "tx_id": "571",
        "data_collection": "inventory.items",
        "expected": 1,
        "applied": 1,
        "seen": 1,
        "status": "complete",
        "end_seen": True,
    }


def test_appends_tidy_the_snapshots_and_a_redo_still_finds_its_rows(spark: SparkSession, few_snapshots: None) -> None:
    source = f"tidy{uuid.uuid4().hex[:6]}"
    batches = [f"{source}-{i}" for i in range(7)]
    for batch in batches:
        audit.append_rows(spark, audit.TRANSACTIONS, [_tx_row(source, batch)], batch, redo=False)
    table = lake_rows.load(spark, audit.TRANSACTIONS.sql_name)
    assert table is not None
    assert len(table.metadata.snapshots) <= 4
    assert not lake_rows.committed_by(table, batches[0])  # its snapshot was expired
    assert lake_rows.committed_by(table, batches[-1])
    # a redo of the first batch finds its rows and appends nothing; a redo of a batch that never wrote appends
    audit.append_rows(spark, audit.TRANSACTIONS, [_tx_row(source, batches[0])], batches[0], redo=True)
    audit.append_rows(spark, audit.TRANSACTIONS, [_tx_row(source, f"{source}-new")], f"{source}-new", redo=True)
    got = spark.sql(
        f"SELECT batch_id, count(*) FROM {audit.TRANSACTIONS.sql_name} WHERE source = '{source}' GROUP BY batch_id"
    ).collect()
    assert {r[0]: r[1] for r in got} == dict.fromkeys([*batches, f"{source}-new"], 1)


def test_the_ledger_keeps_its_rows_when_its_snapshots_are_tidied(spark: SparkSession, few_snapshots: None) -> None:
    source = f"tidy{uuid.uuid4().hex[:6]}"
    ledger = BatchLedger(spark, source)
    ledger.ensure()
    for seq in range(1, 6):
        for status in (PLANNED, COMMITTED):
            ledger.append(BatchRecord(source, f"{source}-{seq}", seq, status, [], {("t", 0): seq * 10}))
    ledger.append(BatchRecord(source, f"{source}-6", 6, PLANNED, [], {("t", 0): 60}))
    table = lake_rows.load(spark, ledger.name)
    assert table is not None and len(table.metadata.snapshots) <= 4
    committed, pending = ledger.last()
    assert committed is not None and (committed.batch_id, committed.next_offsets) == (f"{source}-5", {("t", 0): 50})
    assert pending is not None and pending.batch_id == f"{source}-6"


def test_the_ledger_reads_from_the_last_committed_batch_on_and_all_of_it_when_that_is_gone(spark: SparkSession) -> None:
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual

    source = f"floor{uuid.uuid4().hex[:6]}"
    ledger = BatchLedger(spark, source)
    ledger.ensure()
    table = lake_rows.load(spark, ledger.name)
    assert table is not None and table.properties["commit.manifest-merge.enabled"] == "true"
    for seq in (1, 2):
        ledger.append(BatchRecord(source, f"{source}-{seq}", seq, PLANNED, [], {}))
        ledger.append(BatchRecord(source, f"{source}-{seq}", seq, COMMITTED, [], {("t", 0): seq}))
    committed, _ = ledger.last()  # this process now reads from seq 2 on
    assert committed is not None and committed.seq == 2
    ledger.append(BatchRecord(source, f"{source}-3", 3, PLANNED, [], {}))
    committed, pending = ledger.last()
    assert committed is not None and committed.seq == 2
    assert pending is not None and pending.batch_id == f"{source}-3"
    # rows from seq 2 on deleted by hand: the read finds no committed row there, and reads every row
    table = lake_rows.load(spark, ledger.name)
    assert table is not None
    table.delete(And(EqualTo("source", source), GreaterThanOrEqual("seq", 2)))
    committed, pending = ledger.last()
    assert committed is not None and (committed.seq, committed.next_offsets) == (1, {("t", 0): 1})
    assert pending is None


def test_an_append_gives_a_table_created_without_them_the_append_properties(spark: SparkSession) -> None:
    name = f"lake.cdc_audit.bare{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {name} (source STRING, seq BIGINT) USING iceberg")
    lake_rows.append_rows(spark, name, [{"source": "pg", "seq": 1}], batch_id="b1")
    table = lake_rows.load(spark, name)
    assert table is not None
    assert {k: table.properties.get(k) for k in lake_rows.APPEND_TABLE_PROPERTIES} == lake_rows.APPEND_TABLE_PROPERTIES
    assert lake_rows.committed_by(table, "b1")
    assert spark.sql(f"SELECT source, seq FROM {name}").collect() == [("pg", 1)]


def test_a_transaction_works_out_its_metadata_once_per_staged_update_and_commits_as_pyiceberg_does(
    spark: SparkSession,
) -> None:
    """pyiceberg's own transaction deep-copies the table's metadata on every read of it (about 18 per append)."""
    import pyarrow as pa

    name = f"lake.cdc_audit.memo{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {name} (source STRING, seq BIGINT) USING iceberg")
    table = lake_rows.load(spark, name)
    assert table is not None
    with lake_rows.transaction(table) as tx:
        first = tx.table_metadata
        assert tx.table_metadata is first
        tx.set_properties({"cdc.test": "1"})
        staged = tx.table_metadata
        assert staged is not first and staged.properties["cdc.test"] == "1" and "cdc.test" not in first.properties
        assert tx.table_metadata is staged
        rows = pa.Table.from_pylist([{"source": "pg", "seq": 7}], schema=table.schema().as_arrow())
        tx.append(rows, snapshot_properties={"cdc.batch-id": "b7"})
        assert len(tx.table_metadata.snapshots) == len(first.snapshots) + 1
    table = lake_rows.load(spark, name)
    assert table is not None and table.properties["cdc.test"] == "1" and lake_rows.committed_by(table, "b7")
    spark.catalog.refreshTable(name)
    assert spark.sql(f"SELECT source, seq FROM {name}").collect() == [("pg", 7)]
