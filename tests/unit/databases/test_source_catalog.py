"""Columns, keys, rows and row counts as each dialect asks for them, on fake DB-API connections (no database)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from unittest import mock

import pytest

from cdclake.databases import SourceColumn, SourceConnection, SourceDatabaseError, SourceTable, load_database

PG = SourceConnection("postgresql", "db", 5433, "cdc_reader", "pw", "demo", "test")
MARIA = SourceConnection("mariadb", "maria", 3307, "cdc_reader", "pw", "demo", "test")


def _postgres(rows: list[tuple[Any, ...]]) -> tuple[Any, mock.MagicMock]:
    dbapi = mock.MagicMock()
    dbapi.execute.return_value.fetchall.return_value = rows
    dbapi.execute.return_value.fetchone.return_value = rows[0] if rows else None
    return load_database("postgresql")(PG, dbapi), dbapi


def _mysql(rows: list[tuple[Any, ...]]) -> tuple[Any, mock.MagicMock]:
    dbapi = mock.MagicMock()
    cursor = dbapi.cursor.return_value.__enter__.return_value
    cursor.fetchall.return_value = rows
    cursor.__iter__.return_value = iter(rows)
    return load_database("mariadb")(MARIA, dbapi), cursor


def test_postgres_catalog_is_a_typed_model() -> None:
    db, dbapi = _postgres(
        [
            ("id", 1, "integer", "integer", False, 32, 0, None, None, None, "int4", "b", "N", None, *(None,) * 10),
            ("price", 2, "numeric", "numeric(12,2)", True, Decimal(12), Decimal(2), None, None, "inventory.money2")
            + ("numeric", "b", "N", None, *(None,) * 10),
            ("at", 3, "timestamp with time zone", "timestamp(6) with time zone", True, None, None, 6, None, None)
            + ("timestamptz", "b", "D", None, *(None,) * 10),
            ("mood", 4, "USER-DEFINED", "inventory.mood", True, None, None, None, None, None, "mood", "e", "E")
            + (["sad", "ok"], *(None,) * 10),
            ("tags", 5, "ARRAY", "character varying(8)[]", True, None, None, None, None, None, "_varchar", "b", "A")
            + (None, "varchar", "b", "S", "character varying", "character varying(8)", None, None, None, 8, None),
        ]
    )
    table = db.table("inventory", "products")
    assert table.columns[1] == SourceColumn(
        "price", 2, "numeric", "numeric(12,2)", True, 12, 2, None, None, "numeric", "base", "inventory.money2"
    )
    assert table.column("at").datetime_precision == 6
    assert table.column("mood").type_kind == "enum" and table.column("mood").enum_values == ("sad", "ok")
    element = table.column("tags").element
    assert table.column("tags").type_kind == "array" and element is not None
    assert (element.type_name, element.native_type, element.character_length) == ("varchar", "character varying(8)", 8)
    assert db.columns("inventory", "products") == ["id", "price", "at", "mood", "tags"]
    assert dbapi.execute.call_args.args[1] == ["inventory", "products"]
    assert "information_schema.columns" in dbapi.execute.call_args.args[0]
    assert "format_type" in dbapi.execute.call_args.args[0]


def test_mysql_catalog_is_a_typed_model() -> None:
    db, cursor = _mysql(
        [
            ("id", 1, "int", b"int(10) unsigned", 0, 10, 0, None, None),
            ("mood", 2, "enum", "enum('a','it''s')", 1, None, None, None, 4),
        ]
    )
    table = db.table("demo", "orders")
    assert table == SourceTable(
        "demo",
        "orders",
        (
            SourceColumn("id", 1, "int", "int(10) unsigned", False, 10, 0, None, unsigned=True),
            SourceColumn("mood", 2, "enum", "enum('a','it''s')", True, character_length=4, enum_values=("a", "it's")),
        ),
    )
    assert cursor.execute.call_args.args[1] == ["demo", "orders"]


def test_an_unknown_table_has_no_columns() -> None:
    table = SourceTable("inventory", "nope")
    assert not table.exists and table.column_names == []
    with pytest.raises(KeyError, match="inventory.nope has no column 'id'"):
        table.column("id")


def test_postgres_rows_and_counts_quote_identifiers() -> None:
    db, dbapi = _postgres([(7,)])
    assert db.row_counts(["inventory.customers"]) == {"inventory.customers": 7}
    assert dbapi.execute.call_args.args[0].as_string(None) == 'SELECT COUNT(*) FROM "inventory"."customers"'
    cursor = dbapi.cursor.return_value.__enter__.return_value
    cursor.stream.return_value = iter([(1, "a")])
    assert list(db.rows("inventory", "my table", ["id", 'na"me'], order_by=["id"])) == [(1, "a")]
    query = cursor.stream.call_args.args[0].as_string(None)
    assert query == 'SELECT "id", "na""me" FROM "inventory"."my table" ORDER BY "id"'


def test_mysql_rows_and_counts_quote_identifiers() -> None:
    db, cursor = _mysql([(3,)])
    assert db.row_counts(["demo.orders"]) == {"demo.orders": 3}
    assert cursor.execute.call_args.args[0] == "SELECT COUNT(*) FROM `demo`.`orders`"
    assert list(db.rows("demo", "orders", ["id", "we`ird"])) == [(3,)]
    assert cursor.execute.call_args.args[0] == "SELECT `id`, `we``ird` FROM `demo`.`orders`"


def test_a_failed_count_names_the_table_and_the_connection() -> None:
    db, dbapi = _postgres([])
    dbapi.execute.side_effect = RuntimeError("canceling statement due to statement timeout")
    with pytest.raises(SourceDatabaseError, match=r"cannot count the rows of inventory.orders in cdc_reader@db:5433"):
        db.row_counts(["inventory.orders"])
