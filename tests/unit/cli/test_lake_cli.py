"""`cdclake lake info --json` prints what opens the embedded lake from pyiceberg and DuckDB; `lake tables` lists it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from lake_readers import duckdb_rows, pyiceberg_rows
from pyiceberg.catalog import load_catalog
from typer.testing import CliRunner

from cdclake.cli.main import app


def test_lake_info_json_opens_the_lake_from_pyiceberg(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["lake", "info", "--json", "--lake", str(tmp_path)])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["kind"] == "embedded"
    assert info["duckdb"] == {"extensions": ["httpfs", "avro", "iceberg"], "setup": [], "tables": {}}
    props = info["pyiceberg"]
    assert props == {
        "name": "lake",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path.resolve()}/catalog.db",
        "warehouse": (tmp_path.resolve() / "warehouse").as_uri(),
    }
    catalog = load_catalog(**props)
    catalog.create_namespace(("pg", "inventory"))
    table = catalog.create_table(("pg", "inventory", "customers"), schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2, 3]}))
    info = json.loads(runner.invoke(app, ["lake", "info", "--json", "--lake", str(tmp_path)]).output)
    assert pyiceberg_rows(info, "pg.inventory.customers", ["id"]) == [(1,), (2,), (3,)]
    assert duckdb_rows(info, "pg.inventory.customers", "id") == [(1,), (2,), (3,)]
    listing = runner.invoke(app, ["lake", "tables", "--lake", str(tmp_path)])
    assert listing.exit_code == 0 and "lake.pg.inventory.customers" in listing.output and "3" in listing.output
