"""`cdclake quarantine list | release` against audit tables written with pyiceberg (no Spark)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from typer.testing import CliRunner

from cdclake.cli.main import app
from cdclake.cli.quarantine import ACTIONS
from cdclake.exceptions import QuarantineReleaseError
from cdclake.ingest.quarantine import ReleaseAction
from cdclake.lake import LakeConfig


def test_list_and_release_on_a_lake_with_nothing_quarantined(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["quarantine", "list", "--lake", str(tmp_path)])
    assert listed.exit_code == 0 and "no quarantined tables" in listed.output
    as_json = runner.invoke(app, ["quarantine", "list", "--json", "--lake", str(tmp_path)])
    assert json.loads(as_json.output) == []
    released = runner.invoke(
        app, ["quarantine", "release", "pg.inventory.items", "--action", "evolve", "--lake", str(tmp_path)]
    )
    assert released.exit_code == 1 and isinstance(released.exception, QuarantineReleaseError)
    assert str(released.exception) == (
        "lake.pg.inventory.items is not quarantined (quarantined tables: none); `cdclake quarantine list` shows them"
    )
    bad = runner.invoke(app, ["quarantine", "release", "x.y.z", "--action", "drop", "--lake", str(tmp_path)])
    assert bad.exit_code == 2 and "'drop' is not one of evolve, recreate" in bad.output
    assert ACTIONS == tuple(a.value for a in ReleaseAction)  # the CLI names them without importing PySpark


def test_release_request_is_checked_against_the_lake_table_and_recorded(tmp_path: Path) -> None:
    catalog = load_catalog(**LakeConfig.embedded(tmp_path).pyiceberg_properties())
    catalog.create_namespace(("cdc_audit",))
    catalog.create_namespace(("pg", "inventory"))
    table = "lake.pg.inventory.items"
    reason = f"{table}: cannot evolve (evolve): incompatible_type_change name: STRING -> BIGINT"
    held = pa.table(
        {
            "source": ["postgres", "postgres"],
            "batch_id": ["b1", "b2"],
            "table": [table, table],
            "topic": ["pg.inventory.items"] * 2,
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([7, 9], pa.int64()),
            "key": ["{}", "{}"],
            "value": ["{}", "{}"],
            "reason": [reason, reason],
            "recorded_at": pa.array([datetime(2026, 5, 1, 12, tzinfo=UTC), datetime(2026, 5, 1, 13, tzinfo=UTC)]),
        }
    )
    catalog.create_table(("cdc_audit", "quarantine"), schema=held.schema).append(held)
    items = pa.schema([("id", pa.int64()), ("name", pa.string())])
    catalog.create_table(("pg", "inventory", "items"), schema=items)
    runner = CliRunner()

    listed = runner.invoke(app, ["quarantine", "list", "--lake", str(tmp_path)], env={"COLUMNS": "300"})
    assert listed.exit_code == 0, listed.output
    assert table in listed.output and "incompatible_type_change name: STRING -> BIGINT" in listed.output
    refused = runner.invoke(app, ["quarantine", "release", table, "--action", "evolve", "--lake", str(tmp_path)])
    assert isinstance(refused.exception, QuarantineReleaseError)
    assert "column name is still STRING" in str(refused.exception)

    released = runner.invoke(
        app, ["quarantine", "release", table, "--action", "recreate", "--note", "rebuild", "--lake", str(tmp_path)]
    )
    assert released.exit_code == 0, released.output
    (entry,) = json.loads(runner.invoke(app, ["quarantine", "list", "--json", "--lake", str(tmp_path)]).output)
    assert (entry["records"], entry["batches"], entry["since"]) == (2, ["b1", "b2"], "2026-05-01 12:00:00+00:00")
    assert (entry["pending_release"]["action"], entry["pending_release"]["detail"]) == ("recreate", "rebuild")
    (request,) = catalog.load_table(("cdc_audit", "quarantine_releases")).scan().to_arrow().to_pylist()
    assert {k: request[k] for k in ("source", "table", "action", "status", "records", "detail")} == {
        "source": "postgres",
        "table": table,
        "action": "recreate",
        "status": "requested",
        "records": 2,
        "detail": "rebuild",
    }
