"""Identifier quoting (:mod:`cdclake.sql`) and the Spark SQL text of every statement builder, with hostile names.

Pure: the builders return SQL text; no Spark session is started. A small tokenizer reads the text back and
checks that every backtick-quoted identifier and string literal is closed and that a hostile column name comes
back as exactly one identifier.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql import types as T

from cdclake.connectors.spec import PartitionField
from cdclake.decode.columns import MetaColumn, Origin
from cdclake.ingest import apply
from cdclake.ingest.schema import (
    create_table_ddl,
    identifier_fields_sql,
    plan_evolution,
    spark_sql_type,
    tombstone_table_ddl,
)
from cdclake.ingest.tables import partition_sql
from cdclake.lake.audit import AuditTable
from cdclake.lake.maintenance import MaintenancePolicy, tombstone_calls
from cdclake.lake.names import audit_table
from cdclake.sql import quote_identifier, quote_name, quote_string

INJECTION = "x` = 1 OR `y"
BACKTICK = "a`b"
HOSTILE = (INJECTION, BACKTICK)
TARGET = "`lake`.`pg`.`public`.`t`"


def identifiers(sql: str) -> list[str]:
    """The backtick-quoted identifiers of ``sql``, unquoted, in order.

    Raises:
        AssertionError: a quoted identifier or a string literal is not closed.
    """
    found: list[str] = []
    i = 0
    while i < len(sql):
        ch = sql[i]
        if ch == "`":
            j, name = i + 1, []
            while True:
                assert j < len(sql), f"unclosed identifier at {i}: {sql!r}"
                if sql[j] == "`":
                    if sql[j + 1 : j + 2] == "`":
                        name.append("`")
                        j += 2
                        continue
                    break
                name.append(sql[j])
                j += 1
            found.append("".join(name))
            i = j + 1
        elif ch == "'":
            j = i + 1
            while True:
                assert j < len(sql), f"unclosed string at {i}: {sql!r}"
                if sql[j] == "\\":
                    j += 2
                    continue
                if sql[j] == "'":
                    break
                j += 1
            i = j + 1
        else:
            i += 1
    return found


# -- the helpers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "quoted"),
    [
        ("id", "`id`"),
        ("a.b", "`a.b`"),  # a dot inside a part stays in the part
        ("a b", "`a b`"),
        ("a`b", "`a``b`"),
        ("`", "````"),
        ("x` = 1 OR `y", "`x`` = 1 OR ``y`"),
        ("", "``"),
    ],
)
def test_quote_identifier(part: str, quoted: str) -> None:
    assert quote_identifier(part) == quoted
    assert identifiers(quoted) == [part]


def test_quote_name_quotes_every_part() -> None:
    assert quote_name(("lake", "pg", "customers")) == "`lake`.`pg`.`customers`"
    assert quote_name(["lake", "a`b", "x.y"]) == "`lake`.`a``b`.`x.y`"
    assert identifiers(quote_name(("lake", INJECTION))) == ["lake", INJECTION]


@pytest.mark.parametrize(
    ("value", "literal"),
    [("pg", "'pg'"), ("it's", "'it\\'s'"), ("a\\b", "'a\\\\b'"), ("x') OR ('1", "'x\\') OR (\\'1'")],
)
def test_quote_string(value: str, literal: str) -> None:
    assert quote_string(value) == literal
    assert identifiers(f"a = {literal} AND `b` = 1") == ["b"]  # the literal is closed where it should be


def test_lake_names_unchanged_for_normal_names() -> None:
    assert audit_table("batches") == "`lake`.`cdc_audit`.`batches`"


# -- DDL ---------------------------------------------------------------------------------------------------


def _schema(*names: str) -> T.StructType:
    return T.StructType([T.StructField(n, T.LongType()) for n in names])


def test_create_table_ddl_normal_names() -> None:
    ddl = create_table_ddl(TARGET, _schema("id", "name"), ("id",), (("_cdc_op", "STRING"),))
    assert ddl == (
        f"CREATE TABLE IF NOT EXISTS {TARGET} (\n  `id` BIGINT NOT NULL,\n  `name` BIGINT,\n  `_cdc_op` STRING\n)"
        " USING iceberg TBLPROPERTIES ('format-version'='2')"
    )


@pytest.mark.parametrize("name", HOSTILE)
def test_create_table_ddl_hostile_column(name: str) -> None:
    schema = T.StructType(
        [
            T.StructField(name, T.LongType()),
            T.StructField("s", T.StructType([T.StructField(name, T.StringType())])),
        ]
    )
    ddl = create_table_ddl(
        TARGET,
        schema,
        (name,),
        (("_cdc_op", "STRING"),),
        (partition_sql(PartitionField(transform="identity", column=name)),),
    )
    assert f"{quote_identifier(name)} BIGINT NOT NULL" in ddl
    assert f"STRUCT<{quote_identifier(name)}: STRING>" in ddl
    assert identifiers(ddl) == ["lake", "pg", "public", "t", name, "s", name, "_cdc_op", name]


@pytest.mark.parametrize("name", HOSTILE)
def test_partition_sql_hostile_column(name: str) -> None:
    for fld, expected in (
        (PartitionField(transform="identity", column=name), quote_identifier(name)),
        (PartitionField(transform="day", column=name), f"days({quote_identifier(name)})"),
        (PartitionField(transform="bucket", column=name, width=16), f"bucket(16, {quote_identifier(name)})"),
    ):
        assert partition_sql(fld) == expected
        assert identifiers(expected) == [name]


def test_spark_sql_type_struct_fields_quoted() -> None:
    dtype = T.StructType([T.StructField(BACKTICK, T.IntegerType()), T.StructField("ok", T.StringType())])
    assert spark_sql_type(dtype) == "STRUCT<`a``b`: INT, `ok`: STRING>"
    assert MetaColumn("m", dtype, Origin.DECODER, "m").sql_type == "STRUCT<`a``b`: INT, `ok`: STRING>"


@pytest.mark.parametrize("name", HOSTILE)
def test_plan_evolution_hostile_columns(name: str) -> None:
    lake = T.StructType([T.StructField("id", T.LongType()), T.StructField(name, T.IntegerType())])
    added = f"{name}2"
    decoded = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField(name, T.LongType()),  # widened
            T.StructField(added, T.StringType()),  # added
        ]
    )
    plan = plan_evolution(TARGET, lake, decoded, ())
    assert plan.ddl == (
        f"ALTER TABLE {TARGET} ALTER COLUMN {quote_identifier(name)} TYPE BIGINT",
        f"ALTER TABLE {TARGET} ADD COLUMN {quote_identifier(added)} STRING",
    )
    assert [identifiers(d)[-1] for d in plan.ddl] == [name, added]


@pytest.mark.parametrize("name", HOSTILE)
def test_tombstone_table_and_identifier_fields(name: str) -> None:
    schema = _schema(name, "other")
    ddl = tombstone_table_ddl("`lake`.`pg`.`t__cdc_deletes`", schema, (name,))
    assert ddl == (
        f"CREATE TABLE IF NOT EXISTS `lake`.`pg`.`t__cdc_deletes` ({quote_identifier(name)} BIGINT NOT NULL, "
        "_cdc_position ARRAY<DECIMAL(38,0)>, _cdc_deleted_at TIMESTAMP) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read')"
    )
    assert identifiers(ddl) == ["lake", "pg", "t__cdc_deletes", name]
    fields = identifier_fields_sql(TARGET, (name, "id"))
    assert fields == f"ALTER TABLE {TARGET} SET IDENTIFIER FIELDS {quote_identifier(name)}, `id`"
    assert identifiers(fields)[-2:] == [name, "id"]


@pytest.mark.parametrize("name", HOSTILE)
def test_audit_table_ddl_hostile_column(name: str) -> None:
    ddl = AuditTable("things", ((name, "STRING"),)).ddl()
    assert ddl == (
        f"CREATE TABLE IF NOT EXISTS `lake`.`cdc_audit`.`things` ({quote_identifier(name)} STRING) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'commit.manifest-merge.enabled'='true')"
    )


def test_tombstone_calls_quote_the_side_table() -> None:
    policy = MaintenancePolicy(expire_tombstones=True, dry_run=True)
    (call,) = tombstone_calls("lake.pg.public.t", policy, datetime(2024, 1, 2, tzinfo=UTC))
    assert call.sql.startswith("SELECT count(*) AS expired FROM lake.`pg`.`public`.`t__cdc_deletes` WHERE ")


# -- MERGE -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE)
def test_update_sql_hostile_columns(name: str) -> None:
    sql = apply.update_sql(
        TARGET,
        "cdc_update_1",
        key_columns=(name,),
        data_columns=(name, "v"),
        target_columns=(name, "v", "_cdc_op"),
        meta_columns=("_cdc_op",),
    )
    q = quote_identifier(name)
    assert sql.splitlines()[0] == f"MERGE INTO {TARGET} t USING cdc_update_1 s ON t.{q} = s.{q}"
    assert sql.endswith("THEN UPDATE SET t.`v` = s.`v`, t.`_cdc_op` = s.`_cdc_op`")
    assert identifiers(sql).count(name) == 2


@pytest.mark.parametrize("name", HOSTILE)
def test_update_sql_hostile_keep_column(name: str) -> None:
    sql = apply.update_sql(
        TARGET,
        "v1",
        key_columns=("id",),
        data_columns=("id", name),
        target_columns=("id", name),
        meta_columns=(),
        keep_columns=(name,),
    )
    q = quote_identifier(name)
    assert sql.endswith(
        f"UPDATE SET t.{q} = CASE WHEN array_contains(s._keep, {quote_string(name)}) THEN t.{q} ELSE s.{q} END"
    )
    assert identifiers(sql).count(name) == 3


def test_update_sql_normal_names() -> None:
    sql = apply.update_sql(TARGET, "v1", ("id",), ("id", "v"), ("id", "v", "w"), ())
    assert sql == (
        f"MERGE INTO {TARGET} t USING v1 s ON t.`id` = s.`id`\n"
        "WHEN MATCHED AND s._cdc_op = 'd' THEN DELETE\n"
        "WHEN MATCHED THEN UPDATE SET "
        "t.`v` = s.`v`, t.`w` = NULL"
    )


@pytest.mark.parametrize("name", HOSTILE)
def test_update_sql_with_inserts_quotes_every_inserted_column(name: str) -> None:
    target = ("id", name, "gone", "_cdc_op", "_cdc_ingested_at")
    sql = apply.update_sql(TARGET, "v1", ("id",), ("id", name), target, ("_cdc_op", "_cdc_ingested_at"), insert=True)
    q = quote_identifier(name)
    # the matched clauses as without inserts, then the new keys' rows: now as their ingest time, a column the
    # rows do not carry null, a delete of a key the table does not hold not inserted
    assert (
        sql.splitlines()[:3]
        == apply.update_sql(TARGET, "v1", ("id",), ("id", name), target, ("_cdc_op", "_cdc_ingested_at")).splitlines()
    )
    assert sql.splitlines()[3] == (
        f"WHEN NOT MATCHED AND s._cdc_op <> 'd' THEN INSERT (`id`, {q}, `gone`, `_cdc_op`, `_cdc_ingested_at`) "
        f"VALUES (s.`id`, s.{q}, NULL, s.`_cdc_op`, current_timestamp())"
    )
    assert identifiers(sql).count(name) == 4


@pytest.mark.parametrize("name", HOSTILE)
def test_tombstone_merge_sql_hostile_key(name: str) -> None:
    sql = apply.tombstone_merge_sql("`lake`.`pg`.`t__cdc_deletes`", "cdc_batch_1", (name,))
    q = quote_identifier(name)
    assert sql.splitlines()[0] == (f"MERGE INTO `lake`.`pg`.`t__cdc_deletes` d USING cdc_batch_1 x ON d.{q} = x.{q}")
    # only WHEN MATCHED: every key of the view has a tombstone (an inner join, which can broadcast the deletes)
    assert sql.splitlines()[-1] == (
        "WHEN MATCHED AND x._cdc_position > d._cdc_position THEN UPDATE SET "
        "d._cdc_position = x._cdc_position, d._cdc_deleted_at = current_timestamp()"
    )
    assert "NOT MATCHED" not in sql
    assert identifiers(sql).count(name) == 2


@pytest.mark.parametrize("name", HOSTILE)
def test_scd2_merge_sql_hostile_key(name: str) -> None:
    sql = apply.scd2_merge_sql(TARGET, "vers", "closes", (name,), (name, "_cdc_ingested_at"), (name,))
    q, mk = quote_identifier(name), quote_identifier("_mk_" + name)
    assert (
        f"SELECT 'close' AS _kind, {q} AS {mk}, _close_at, NULL AS {q}, NULL AS `_cdc_ingested_at` FROM closes" in sql
    )
    assert f"SELECT 'version' AS _kind, NULL AS {mk}, NULL AS _close_at, {q} AS {q}, " in sql
    assert f") s ON t.{q} = s.{mk} AND t._cdc_is_current" in sql
    assert sql.endswith(f"INSERT ({q}, `_cdc_ingested_at`) VALUES (s.{q}, s.`_cdc_ingested_at`)")
    assert identifiers(sql).count("_mk_" + name) == 3


@pytest.mark.parametrize("name", HOSTILE)
def test_truncate_merges_hostile_key(name: str) -> None:
    q = quote_identifier(name)
    literal = apply.position_literal([5])
    assert apply.delete_older_sql(TARGET, "doomed", (name, "id"), [5]) == (
        f"MERGE INTO {TARGET} t USING doomed d ON t.{q} = d.{q} AND t.`id` = d.`id` "
        f"WHEN MATCHED AND t._cdc_position < {literal} THEN DELETE"
    )
    closed = apply.close_versions_sql(TARGET, "open", (name,), [5])
    assert closed == (
        f"MERGE INTO {TARGET} t USING open o ON t.{q} = o.{q} AND t._cdc_is_current "
        f"WHEN MATCHED THEN UPDATE SET t._cdc_valid_to = {literal}, t._cdc_is_current = false"
    )
    assert identifiers(closed).count(name) == 2


def test_key_literals_of_the_types_a_bound_narrows() -> None:
    from datetime import date
    from decimal import Decimal

    assert apply.key_literal(7, T.IntegerType()) == "CAST(7 AS int)"
    assert apply.key_literal(2**40, T.LongType()) == "CAST(1099511627776 AS bigint)"
    assert apply.key_literal("it's \\ here", T.StringType()) == "'it\\'s \\\\ here'"
    assert apply.key_literal(date(2026, 1, 31), T.DateType()) == "DATE '2026-01-31'"
    assert apply.key_literal(Decimal("1E+3"), T.DecimalType(12, 2)) == "CAST('1000' AS decimal(12,2))"
    # no literal for a null, nor for a type whose order is not the column metrics' (or has no literal here)
    assert apply.key_literal(None, T.IntegerType()) is None
    assert apply.key_literal(b"\x00", T.BinaryType()) is None
    assert apply.key_literal(datetime(2026, 1, 1, tzinfo=UTC), T.TimestampType()) is None


def test_key_bounds_keep_only_the_columns_with_both_literals() -> None:
    types = {"id": T.LongType(), "at": T.TimestampType(), "code": T.StringType()}
    least = {"id": 3, "at": datetime(2026, 1, 1, tzinfo=UTC), "code": None}
    greatest = {"id": 9, "at": datetime(2026, 2, 1, tzinfo=UTC), "code": "z"}
    bounds = apply.key_bounds(least, greatest, types)
    assert bounds == {"id": apply.KeyBound("CAST(3 AS bigint)", "CAST(9 AS bigint)")}
    assert apply.key_range_sql(bounds, "t") == "t.`id` BETWEEN CAST(3 AS bigint) AND CAST(9 AS bigint)"
    with pytest.raises(ValueError, match="at least one key column"):
        apply.key_range_sql({})


def test_key_bounds_list_a_batchs_distinct_values() -> None:
    types = {"id": T.LongType(), "code": T.StringType()}
    least, greatest = {"id": 3, "code": "a'"}, {"id": 9, "code": "z"}
    bounds = apply.key_bounds(least, greatest, types, {"id": [9, 3, 5, 3], "code": ["z", "a'"]})
    assert bounds["id"] == apply.KeyBound(
        "CAST(3 AS bigint)", "CAST(9 AS bigint)", ("CAST(3 AS bigint)", "CAST(5 AS bigint)", "CAST(9 AS bigint)")
    )
    assert apply.key_range_sql(bounds, "t") == (
        "t.`id` IN (CAST(3 AS bigint), CAST(5 AS bigint), CAST(9 AS bigint)) AND t.`code` IN ('a\\'', 'z')"
    )
    assert apply.lists_every_key(bounds, ("id", "code"))
    # a column bounded by its least and greatest only, or not bounded at all, is not listed
    assert not apply.lists_every_key({**bounds, "code": apply.KeyBound("'a'", "'z'")}, ("id", "code"))
    assert not apply.lists_every_key(bounds, ("id", "ts"))
    # a value without a literal (a null key, a value not of the column's type) leaves the column its range
    for odd in (None, b"\x00"):
        bounds = apply.key_bounds(least, greatest, types, {"id": [3, 9], "code": ["a'", odd]})
        assert bounds["code"] == apply.KeyBound("'a\\''", "'z'")
        assert bounds["id"].values == ("CAST(3 AS bigint)", "CAST(9 AS bigint)")


def test_split_ranges_cut_at_the_widest_gaps() -> None:
    from datetime import date
    from decimal import Decimal

    assert apply.split_ranges([1, 2, 3, 10, 11, 30], 3) == [(1, 3), (10, 11), (30, 30)]
    assert apply.split_ranges([1, 2, 3, 10, 11, 30], 1) == [(1, 30)]
    assert apply.split_ranges([5], 4) == [(5, 5)]
    assert apply.split_ranges([1, 2, 4], 9) == [(1, 2), (4, 4)]
    assert apply.split_ranges([3, 6, 9, 12], 4) == [(3, 12)]  # evenly spaced: no gap is wider
    assert apply.split_ranges([], 4) == []
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 6, 1)]
    assert apply.split_ranges(days, 2) == [(days[0], days[1]), (days[2], days[2])]
    assert apply.split_ranges([Decimal("0.5"), Decimal("9.5"), Decimal("9.75")], 2) == [
        (Decimal("0.5"), Decimal("0.5")),
        (Decimal("9.5"), Decimal("9.75")),
    ]


def test_key_bounds_cover_many_values_by_ranges_and_list_them_up_to_a_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    many = [*range(1000, 1000 + apply.KEY_VALUES_MAX), 5_000_000, 5_000_001, 90]
    types = {"id": T.LongType(), "code": T.StringType()}
    codes = [f"c{i:04d}" for i in range(apply.KEY_VALUES_MAX + 1)]
    least, greatest = {"id": 90, "code": codes[0]}, {"id": 5_000_001, "code": codes[-1]}
    bounds = apply.key_bounds(least, greatest, types, {"id": many, "code": codes})
    id_ranges = tuple(
        (f"CAST({a} AS bigint)", f"CAST({b} AS bigint)")
        for a, b in [(90, 90), (1000, 999 + apply.KEY_VALUES_MAX), (5_000_000, 5_000_001)]
    )
    # more values than Iceberg checks against file metrics: ranges skip the files, the list narrows the rows
    assert bounds["id"].ranges == id_ranges
    assert bounds["id"].values == tuple(sorted(f"CAST({v} AS bigint)" for v in many))
    sql = apply.key_range_sql(bounds, "t")
    assert sql.startswith(
        "(t.`id` BETWEEN CAST(90 AS bigint) AND CAST(90 AS bigint) OR t.`id` BETWEEN CAST(1000 AS bigint) AND "
    )
    assert ") AND t.`id` IN (CAST(1000 AS bigint), " in sql
    assert apply.lists_every_key(bounds, ("id", "code"))
    # strings have no gap to split at: the one range, and the list
    assert bounds["code"] == apply.KeyBound(
        quote_string(codes[0]), quote_string(codes[-1]), values=tuple(quote_string(c) for c in codes)
    )
    assert f"`code` BETWEEN 'c0000' AND {quote_string(codes[-1])} AND `code` IN ('c0000', " in apply.key_range_sql(
        bounds
    )
    # above the list's limit: the ranges (or the one range) alone
    monkeypatch.setattr(apply, "KEY_LIST_MAX", apply.KEY_VALUES_MAX)
    bounds = apply.key_bounds(least, greatest, types, {"id": many, "code": codes})
    assert bounds["id"] == apply.KeyBound("CAST(90 AS bigint)", "CAST(5000001 AS bigint)", ranges=id_ranges)
    assert bounds["code"] == apply.KeyBound(quote_string(codes[0]), quote_string(codes[-1]))
    assert not apply.lists_every_key(bounds, ("id",))
    assert apply.key_range_sql(bounds).endswith(f"`code` BETWEEN 'c0000' AND {quote_string(codes[-1])}")


@pytest.mark.parametrize("name", HOSTILE)
def test_merges_narrowed_by_key_bounds_hostile_key(name: str) -> None:
    q = quote_identifier(name)
    bounds = {name: apply.KeyBound(quote_string("a'"), quote_string("b\\"))}
    update = apply.update_sql(TARGET, "v1", (name,), (name, "v"), (name, "v"), (), bounds=bounds)
    assert update.splitlines()[0] == (
        f"MERGE INTO {TARGET} t USING v1 s ON t.{q} = s.{q} AND t.{q} BETWEEN 'a\\'' AND 'b\\\\'"
    )
    tomb = apply.tombstone_merge_sql("`lake`.`pg`.`t__cdc_deletes`", "cdc_batch_1", (name,), bounds)
    assert f"x ON d.{q} = x.{q} AND d.{q} BETWEEN 'a\\'' AND 'b\\\\'\n" in tomb
    assert identifiers(update).count(name) == 3
