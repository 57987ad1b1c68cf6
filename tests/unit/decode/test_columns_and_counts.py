"""The metadata columns' one definition (cdclake.decode.columns) is what the change rows carry, and the typed
counts (DecodeCounts) answer per category and per table and op."""

from __future__ import annotations

import pytest
from decode_helpers import key, record, topic_of, value
from pyspark.sql import SparkSession

from cdclake.decode import DecodeCounts, DecodeOptions, TableId, decode_records, records_from_dicts
from cdclake.decode.batch import TableStats
from cdclake.decode.columns import BY_NAME, LAKE_META_COLUMNS, Origin, change_columns
from cdclake.decode.counts import COUNTED


def test_the_lake_columns_are_named_and_typed_from_the_definitions() -> None:
    assert LAKE_META_COLUMNS == (
        ("_cdc_op", "STRING"),
        ("_cdc_source_ts", "TIMESTAMP"),
        ("_cdc_position", "ARRAY<DECIMAL(38,0)>"),
        ("_cdc_tx_id", "STRING"),
        ("_cdc_topic", "STRING"),
        ("_cdc_partition", "INT"),
        ("_cdc_offset", "BIGINT"),
        ("_cdc_ingested_at", "TIMESTAMP"),
    )
    assert BY_NAME["_cdc_ingested_at"].origin is Origin.INGEST


@pytest.mark.spark
@pytest.mark.parametrize("connector", ["postgresql", "mysql", "mongodb"])
def test_change_rows_carry_the_defined_metadata_columns_in_order(spark: SparkSession, connector: str) -> None:
    if connector == "mongodb":  # the document is extended-JSON text
        text = value(connector, None, extra={"after": '{"_id": 1}'})
    else:
        text = value(connector, {"id": 1}, row_fields=[{"field": "id", "type": "int32"}])
    rows = [record(topic_of(connector), 0, text, key({"id": 1}))]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions())
    (frame,) = batch.tables.values()
    document = connector == "mongodb"
    expected = change_columns(
        document_store=document, before=not document, key=True, messages=connector == "postgresql"
    )
    meta = [fld for fld in frame.schema.fields if fld.name.startswith("_cdc_")]
    assert [fld.name for fld in meta] == [c.name for c in expected]
    for fld, column in zip(meta, expected, strict=True):
        if column.type is not None:
            assert fld.dataType == column.type, fld.name


def test_decode_counts_by_category_and_by_table_and_op() -> None:
    table, other = TableId(server="my", namespace="app", table="t"), TableId(table="u")
    counts = DecodeCounts({**dict.fromkeys(COUNTED, 0), "tombstones": 2, "data": 3}, {table: {"c": 2, "d": 1}})
    assert (counts["data"], counts["tombstones"], counts["dead_letters"], counts["no_such_category"]) == (3, 2, 0, 0)
    assert counts.table_ops(table) == {"c": 2, "d": 1}
    assert counts.table_ops(other) == {}
    assert counts.as_dict() == {**dict.fromkeys(COUNTED, 0), "tombstones": 2, "data": 3}


@pytest.mark.spark
def test_the_counting_pass_counts_change_rows_per_table_and_op(spark: SparkSession) -> None:
    pg, my = topic_of("postgresql"), topic_of("mysql")
    fields = [{"field": "id", "type": "int32"}]
    rows = [
        record(pg, 0, value("postgresql", {"id": 1}, op="c", row_fields=fields), key({"id": 1})),
        record(pg, 1, value("postgresql", {"id": 1}, op="u", row_fields=fields), key({"id": 1})),
        record(pg, 2, None, key({"id": 1})),
        record(my, 0, value("mysql", {"id": 1}, op="r", row_fields=fields), key({"id": 1})),
        record(my, 1, "not json", key({"id": 2})),
    ]
    counts = decode_records(records_from_dicts(spark, rows), options=DecodeOptions()).counts()
    assert (counts["data"], counts["tombstones"], counts["dead_letters"]) == (3, 1, 1)
    assert list(counts.as_dict()) == [*COUNTED, "data"]
    assert counts.table_ops(TableId(server="pg", namespace="public", table="t")) == {"c": 1, "u": 1}
    assert counts.table_ops(TableId(server="my", namespace="app", table="t")) == {"r": 1}


@pytest.mark.spark
@pytest.mark.parametrize("key_values", [True, False])
def test_the_counting_pass_observes_what_bounds_each_tables_keys(spark: SparkSession, key_values: bool) -> None:
    # the apply phase narrows its scans by these: the change rows' least and greatest key and, when asked, their
    # distinct values; a dead letter's or a Kafka tombstone's key is not a change row's
    pg = topic_of("postgresql")
    fields = [{"field": "id", "type": "int32"}]
    rows = [
        record(pg, 0, value("postgresql", {"id": 7}, op="c", row_fields=fields), key({"id": 7})),
        record(pg, 1, value("postgresql", {"id": 3}, op="u", row_fields=fields), key({"id": 3})),
        record(pg, 2, value("postgresql", {"id": 7}, op="u", row_fields=fields), key({"id": 7})),
        record(pg, 3, value("postgresql", None, before={"id": 9}, op="d", row_fields=fields), key({"id": 9})),
        record(pg, 4, None, key({"id": 1})),
        record(pg, 5, "not json", key({"id": 100})),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions()).materialise()
    try:
        counts = batch.counts(key_values=key_values)
        assert (counts["data"], counts["tombstones"], counts["dead_letters"]) == (4, 1, 1)
        stats = batch.table_stats(TableId(server="pg", namespace="public", table="t"))
        assert stats is not None
        assert (stats.key_least, stats.key_greatest) == ({"id": 3}, {"id": 9})
        if key_values:
            assert stats.key_values is not None and sorted(stats.key_values["id"]) == [3, 7, 9]
        else:
            assert stats.key_values is None
    finally:
        batch.release()


def test_key_bounds_of_a_table_read_from_several_topics_cover_every_topics_rows() -> None:
    # a table read from two topics: a key column bounded by both is bounded by their widest bounds, its values by
    # both's; a column one of them does not bound is not bounded; a part without change rows takes nothing away
    def part(events: dict[str, int], lo: dict[str, int], hi: dict[str, int], values: dict | None) -> TableStats:
        return TableStats(events, None, None, [], key_least=lo, key_greatest=hi, key_values=values)

    a = part({"c": 2}, {"id": 5, "k": 1}, {"id": 9, "k": 1}, {"id": [5, 9], "k": [1]})
    b = part({"u": 1}, {"id": 2}, {"id": 6}, {"id": [2, 5]})
    empty = part({}, {}, {}, None)
    both = TableStats.combine([a, b, empty])
    assert (both.key_least, both.key_greatest) == ({"id": 2}, {"id": 9})
    assert both.key_values is not None and sorted(set(both.key_values["id"])) == [2, 5, 9]
    assert set(both.key_values) == {"id"}
    unlisted = TableStats.combine([a, part({"c": 1}, {"id": 1}, {"id": 1}, None)])
    assert (unlisted.key_least, unlisted.key_values) == ({"id": 1}, None)
    assert TableStats.combine([empty]).key_least == {}


@pytest.mark.spark
def test_the_counting_pass_observes_no_bounds_of_a_key_type_the_scans_cannot_be_bounded_by(
    spark: SparkSession,
) -> None:
    # a key column of a type without a literal in the applier's bounds (a boolean here; a map or a timestamp too) is
    # not observed; the composite key's other column is
    pg = topic_of("postgresql")
    fields = [{"field": "flag", "type": "boolean"}, {"field": "id", "type": "int32"}]
    types = {"flag": "boolean"}
    rows = [
        record(
            pg,
            0,
            value("postgresql", {"flag": True, "id": 4}, row_fields=fields),
            key({"flag": True, "id": 4}, types=types),
        ),
        record(
            pg,
            1,
            value("postgresql", {"flag": False, "id": 2}, row_fields=fields),
            key({"flag": False, "id": 2}, types=types),
        ),
    ]
    batch = decode_records(records_from_dicts(spark, rows), options=DecodeOptions()).materialise()
    try:
        batch.counts(key_values=True)
        table = TableId(server="pg", namespace="public", table="t")
        assert batch.table_info[table].key_columns == ("flag", "id")
        stats = batch.table_stats(table)
        assert stats is not None and stats.key_values is not None
        assert (stats.key_least, stats.key_greatest) == ({"id": 2}, {"id": 4})
        assert sorted(stats.key_values["id"]) == [2, 4] and "flag" not in stats.key_values
    finally:
        batch.release()
