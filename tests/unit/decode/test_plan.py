"""The physical plan parses each record once: the optimizer must not copy the envelope decoder into filters or
fields.

Structural, not timed: a regression here (a filter pushed below the parse, the parse inlined into every field
that reads it) multiplies the decode's cost by the number of columns without changing any decoded value.
"""

from __future__ import annotations

import json

import pytest
from decode_helpers import record, topic_of, value
from pyspark.sql import DataFrame, SparkSession

from cdclake.decode import DecodeOptions, decode_records, records_from_dicts

pytestmark = pytest.mark.spark

FIELDS = [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
    {"field": "at", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
]


def _parses(frame: DataFrame) -> int:
    plan = str(frame._jdf.queryExecution().executedPlan().toString())
    return plan.count("cdclake_decode_")


def _batch(spark: SparkSession, schemas: bool) -> list[dict[str, object]]:
    pg, my = topic_of("postgresql"), topic_of("mysql")
    row_fields = FIELDS if schemas else None
    tx = {"status": "BEGIN", "id": "571", "ts_ms": 1, "event_count": None, "data_collections": None}
    ddl = {"source": {"connector": "mysql", "name": "my"}, "databaseName": "app", "ddl": "ALTER TABLE t ADD c INT"}
    wrap = (lambda payload: json.dumps({"schema": {"type": "struct"}, "payload": payload})) if schemas else json.dumps
    return [
        record(pg, 0, value("postgresql", {"id": 1, "price": "AQ==", "at": 5}, row_fields=row_fields)),
        record(pg, 1, value("postgresql", {"id": 2, "price": "Ag==", "at": 6}, row_fields=row_fields)),
        record(my, 0, value("mysql", {"id": 1, "price": "AQ==", "at": 5}, row_fields=row_fields)),
        record("pg.transaction", 0, wrap(tx)),
        record("my", 0, wrap(ddl)),
    ]


@pytest.mark.parametrize("schemas", [True, False], ids=["schemas-on", "schemas-off"])
def test_every_output_parses_each_record_once(spark: SparkSession, schemas: bool) -> None:
    schema_source = {} if schemas else {"schema_source": _schema_source()}
    options = DecodeOptions(value_schemas_enabled=schemas, include_before=False, **schema_source)  # type: ignore[arg-type]
    batch = decode_records(records_from_dicts(spark, _batch(spark, schemas)), options=options)
    assert len(batch.tables) == 2
    for frame in batch.tables.values():
        assert frame.count() == frame.count()  # the frame runs
        assert _parses(frame) == 1
        assert _parses(frame.select("_cdc_op")) == 1
        assert _parses(frame.groupBy("_cdc_op").count()) == 1
    assert batch.transactions.count() == 1 and _parses(batch.transactions) == 1
    assert batch.schema_changes.count() == 1 and _parses(batch.schema_changes) == 1
    # dead letters: the two data topics, the transaction topic and the schema change topic, once each
    assert batch.dead_letters.count() == 0 and _parses(batch.dead_letters) == 4
    batch.materialise()
    for frame in batch.tables.values():
        assert _parses(frame) == 1  # the cached projection's plan, parsed once when it is filled


def test_a_materialised_batch_reads_its_transaction_events_from_the_cache(spark: SparkSession) -> None:
    """The transaction topics' projection is cached with the data topics': the counting pass parses each
    BEGIN/END record once, and the events and dead letters read the cached rows (which keep a record's raw key
    and value only when it is a dead letter)."""
    bad = record(
        "pg.transaction",
        1,
        '{"schema": {"type": "struct"}, "payload": {"status": "COMMIT", "id": "9"}}',
        key_text='{"id": "9"}',
    )
    records = [*_batch(spark, True), bad]
    options = DecodeOptions(value_schemas_enabled=True, include_before=False)
    lazy = decode_records(records_from_dicts(spark, records), options=options)
    batch = decode_records(records_from_dicts(spark, records), options=options).materialise()
    try:
        for frame in (batch.transactions, batch.dead_letters):
            assert "InMemoryTableScan" in str(frame.select("*")._jdf.queryExecution().executedPlan().toString())
        assert batch.counts() == lazy.counts()
        (staged,) = batch._side_staged
        assert staged.is_cached
        assert sorted((r["offset"], r["key"] is None, r["value"] is None) for r in staged.collect()) == [
            (0, True, True),  # BEGIN: an event, its raw record not kept
            (1, False, False),  # an unknown status: a dead letter, kept whole
        ]
        assert [(r["id"], r["status"]) for r in batch.transactions.collect()] == [("571", "BEGIN")]
        dead = [r for r in batch.dead_letters.collect() if r["topic"] == "pg.transaction"]
        assert [(r["offset"], r["reason"], r["key"], r["value"]) for r in dead] == [
            (1, "unknown_tx_status", bad["key"], bad["value"])
        ]
    finally:
        batch.release()
    assert not staged.is_cached


def _schema_source():  # type: ignore[no-untyped-def]
    from cdclake.decode import ConnectSchemaSource

    row = {"type": "struct", "fields": FIELDS}
    return ConnectSchemaSource({topic_of("postgresql"): row, topic_of("mysql"): row})
