"""Where schema-less records' column types come from: the spec's ``converters.schema_source`` and its sources.

The database is a stand-in here (a :class:`SourceDatabase` whose catalog a test sets): these tests are about
when the catalog is read, which columns and keys come out, and the errors. The mapping of real catalogs is
tested against the live databases in ``tests/integration/test_database_connect_types.py`` and
``tests/integration/test_schemas_off_captures.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdclake.connectors import load_spec
from cdclake.connectors.loader import parse_spec
from cdclake.databases import SourceConnection, SourceDatabase
from cdclake.databases.catalog import SourceColumn, SourceTable
from cdclake.databases.schema_source import (
    DatabaseSchemaSource,
    parse_message_key_columns,
    schema_source_for,
    spec_schema_source,
)
from cdclake.decode import ConnectSchemaSource, NoSchemaSource
from cdclake.decode.schema_source import SchemaSource
from cdclake.exceptions import ConfigError, ConnectorSpecError, ConnectSchemaError
from cdclake.ingest.config import SourceConfig

PG = SourceConnection("postgresql", "db", 5432, "cdc_reader", "pw", "demo", "test catalog")


def _column(name: str, ordinal: int, data_type: str, native: str, **kw: Any) -> SourceColumn:
    return SourceColumn(name, ordinal, data_type, native, kw.pop("nullable", True), **kw)


ITEMS = (
    _column("id", 1, "bigint", "bigint", nullable=False),
    _column("name", 2, "text", "text"),
    _column("amount", 3, "numeric", "numeric(12,2)", numeric_precision=12, numeric_scale=2),
)


class FakeDatabase(SourceDatabase):
    """A catalog a test sets; counts the reads."""

    tables: dict[tuple[str, str], tuple[SourceColumn, ...]] = {}
    keys: dict[tuple[str, str], list[str]] = {}

    def __init__(self) -> None:
        super().__init__(PG, None)
        self.reads: list[str] = []

    @classmethod
    def _connect(cls, source: SourceConnection, *, utc: bool) -> Any:  # pragma: no cover - never called
        raise AssertionError

    def table(self, namespace: str, table: str) -> SourceTable:
        self.reads.append(f"{namespace}.{table}")
        return SourceTable(namespace, table, self.tables.get((namespace, table), ()))

    def primary_key(self, namespace: str, table: str) -> list[str]:
        return self.keys.get((namespace, table), [])

    def rows(self, namespace: str, table: str, columns: Sequence[str], order_by: Sequence[str]) -> Iterator[Any]:
        raise AssertionError

    def row_count(self, namespace: str, table: str) -> int:
        raise AssertionError

    def close(self) -> None:
        pass


@pytest.fixture
def db() -> Iterator[FakeDatabase]:
    FakeDatabase.tables = {("inventory", "items"): ITEMS}
    FakeDatabase.keys = {("inventory", "items"): ["id"]}
    yield FakeDatabase()


def _spec(tmp_path: Path, **converters: Any) -> Any:
    raw = yaml.safe_load(load_spec("postgres").source_path.read_text())  # type: ignore[union-attr]
    raw["converters"] = {"key_schemas_enable": False, "value_schemas_enable": False, **converters}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_spec(path)


def _source(spec: Any, db: FakeDatabase, lake: SchemaSource | None = None) -> DatabaseSchemaSource:
    return DatabaseSchemaSource(spec, PG, lake=lake, opener=lambda _c: db)


def test_types_come_from_the_catalog_and_keys_from_the_primary_key(tmp_path: Path, db: FakeDatabase) -> None:
    source = _source(_spec(tmp_path), db)
    fields = source.row_fields("pg.inventory.items", "inventory.items")
    assert [(f["field"], f["type"], f.get("name"), f.get("optional")) for f in fields or []] == [
        ("id", "int64", None, False),
        ("name", "string", None, True),
        ("amount", "bytes", "org.apache.kafka.connect.data.Decimal", True),
    ]
    assert fields[2]["parameters"]["scale"] == "2"  # type: ignore[index]
    assert source.key_columns("pg.inventory.items", "inventory.items") == ("id",)


def test_a_table_is_read_once_per_batch_and_again_for_a_field_it_lacks(tmp_path: Path, db: FakeDatabase) -> None:
    source = _source(_spec(tmp_path), db)
    source.begin_batch()
    source.row_fields("t", "inventory.items", seen_fields=frozenset({"id", "name"}))
    source.row_fields("t", "inventory.items", seen_fields=frozenset({"id"}))
    assert db.reads == ["inventory.items"]

    # a column added since the read: the records carry it, the catalog is read again and has it
    FakeDatabase.tables[("inventory", "items")] = (*ITEMS, _column("note", 4, "text", "text"))
    fields = source.row_fields("t", "inventory.items", seen_fields=frozenset({"id", "note"}))
    assert db.reads == ["inventory.items"] * 2
    assert [f["field"] for f in fields or []] == ["id", "name", "amount", "note"]

    source.begin_batch()
    source.row_fields("t", "inventory.items")
    assert db.reads == ["inventory.items"] * 3
    assert source.reads == {"inventory.items": 3}


def test_columns_dropped_from_the_database_come_from_the_lake(tmp_path: Path, db: FakeDatabase) -> None:
    lake = ConnectSchemaSource({"inventory.items": {"id": "int64", "name": "string", "gone": "decimal(5,1)"}})
    source = _source(_spec(tmp_path), db, lake=lake)
    fields = source.row_fields("t", "inventory.items", seen_fields=frozenset({"id", "gone"}))
    assert [f["field"] for f in fields or []] == ["id", "name", "amount", "gone"]
    assert fields[-1]["parameters"]["scale"] == "1" and fields[-1]["optional"] is True  # type: ignore[index]


def test_a_column_neither_the_database_nor_the_lake_has_is_an_error_naming_it(tmp_path: Path, db: FakeDatabase) -> None:
    source = _source(_spec(tmp_path), db)
    with pytest.raises(ConnectSchemaError, match=r"inventory\.items.*mystery.*converters\.schema_source"):
        source.row_fields("t", "inventory.items", seen_fields=frozenset({"id", "mystery"}))


def test_a_table_the_database_does_not_show_has_no_schema(tmp_path: Path, db: FakeDatabase) -> None:
    assert _source(_spec(tmp_path), db).row_fields("t", "inventory.nothing") is None


def test_message_key_columns_win_over_the_primary_key(tmp_path: Path, db: FakeDatabase) -> None:
    spec = _spec(tmp_path)
    raw = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["extra"] = {"message.key.columns": "inventory.items:name,amount; inventory.other:x"}
    keyed = parse_spec(raw, source=spec.source_path)
    assert _source(keyed, db).key_columns("t", "inventory.items") == ("name", "amount")
    assert parse_message_key_columns("a.b:c") == {"a.b": ("c",)}
    with pytest.raises(ConfigError, match=r"message\.key\.columns.*'a\.b'"):
        parse_message_key_columns("a.b")


def test_the_spec_names_the_schema_source(tmp_path: Path) -> None:
    assert _spec(tmp_path).converters.schema_source == "database"
    assert _spec(tmp_path, schema_source="lake").converters.schema_source == "lake"
    spec = _spec(tmp_path, schema_source="types.json")
    assert spec.schema_source_file == tmp_path / "types.json"
    with pytest.raises(ConnectorSpecError, match=r"converters\.schema_source.*'database', 'lake'"):
        _spec(tmp_path, schema_source="guess")


def test_a_schema_file_is_read_in_the_documented_format(tmp_path: Path) -> None:
    (tmp_path / "types.json").write_text(
        json.dumps(
            {
                "tables": {"inventory.items": {"id": "int64", "price": "decimal(10,2)"}},
                "keys": {"inventory.items": ["id"]},
            }
        )
    )
    source = spec_schema_source(_spec(tmp_path, schema_source="types.json"))
    assert [f["field"] for f in source.row_fields("t", "inventory.items") or []] == ["id", "price"]
    assert source.key_columns("t", "inventory.items") == ("id",)
    assert "types.json" in source.describe()

    (tmp_path / "bad.json").write_text('{"tables": ["x"]}')
    with pytest.raises(ConfigError, match=r"bad\.json.*expected"):
        ConnectSchemaSource.from_file(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match=r"missing\.json does not exist"):
        ConnectSchemaSource.from_file(tmp_path / "missing.json")
    (tmp_path / "types2.json").write_text(json.dumps({"tables": {"t": {"c": "decimal(x)"}}}))
    with pytest.raises(ConfigError, match=r"types2\.json.*unknown type spec"):
        ConnectSchemaSource.from_file(tmp_path / "types2.json")


def test_a_run_without_a_spec_needs_a_lake_or_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--spec SPEC.*--schema-source lake\|FILE\.json"):
        schema_source_for(None, "pg")
    with pytest.raises(ConfigError, match=r"--spec SPEC"):
        schema_source_for(None, "pg", override="database")
    with pytest.raises(ConfigError, match=r"'guess'.*'database', 'lake'"):
        schema_source_for(None, "pg", override="guess")
    with pytest.raises(ConfigError, match="needs the lake's catalog"):
        schema_source_for(None, "pg", override="lake")


def test_a_schemas_off_source_needs_a_schema_source(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    with pytest.raises(ConfigError, match=r"value schemas are off.*schema source"):
        SourceConfig.from_spec(spec)
    assert isinstance(SourceConfig.from_spec(load_spec("postgres")).schema_source, NoSchemaSource)
    given = ConnectSchemaSource({})
    assert SourceConfig.from_spec(spec, schema_source=given).decode_options().schema_source is given
