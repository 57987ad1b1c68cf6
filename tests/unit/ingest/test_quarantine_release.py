"""Quarantine end to end: a table is quarantined, its later events are held too, `cdclake quarantine release`
records a release, and the next batch applies the held events (hand-built records -> real decoder -> lake)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner, Result

from cdclake.cli.main import app
from cdclake.connectors.spec import LakeOptions, SchemaPolicy
from cdclake.exceptions import QuarantineReleaseError
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.quarantine import replaced_suffix

from .conftest import RunBatch, rows
from .events import PgTable

pytestmark = pytest.mark.spark


def _cli(lake: Path, *args: str) -> Result:
    return CliRunner().invoke(app, [*args, "--lake", str(lake)])


def _listed(lake: Path, table: str) -> list[dict[str, Any]]:
    result = _cli(lake, "quarantine", "list", "--json")
    assert result.exit_code == 0, result.output
    return [entry for entry in json.loads(result.output) if entry["table"] == table]


def _releases(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    spark.sql("REFRESH TABLE lake.cdc_audit.quarantine_releases")
    return [
        tuple(r)
        for r in spark.sql(
            "SELECT action, status, batch_id, records, released_batches, detail FROM lake.cdc_audit.quarantine_releases "
            f"WHERE `table` = '{table}' ORDER BY recorded_at"
        ).collect()
    ]


def test_release_with_evolve_after_altering_the_column_applies_the_held_events(
    spark: SparkSession, spark_lake_dir: Path, prefix: str, ingest: RunBatch
) -> None:
    items, other = PgTable(prefix=prefix, table="items"), PgTable(prefix=prefix, table="other")
    ident = f"lake.{prefix}.inventory.items"
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(items.take())
    items.columns = {"id": "int64", "name": "int64", "qty": "int32"}  # string -> int: incompatible
    items.create({"id": 2, "name": 5, "qty": 2}, lsn=200)
    first = ingest(items.take())
    reason = first.tables[ident]["quarantined"]
    assert reason == f"{ident}: cannot evolve (evolve): incompatible_type_change name: STRING -> BIGINT"

    # a quarantined table's later events are held too; other tables go on
    items.create({"id": 3, "name": 7, "qty": 3}, lsn=300)
    other.create({"id": 1, "name": "x", "qty": 1}, lsn=301)
    second = ingest(items.take(), other.take())
    assert (second.tables[ident]["quarantined"], second.tables[ident]["events"]) == (reason, {"c": 1})
    assert rows(spark, prefix) == [(1, "a", 1)]
    assert rows(spark, prefix, table="other") == [(1, "x", 1)]
    (listed,) = _listed(spark_lake_dir, ident)
    assert {k: listed[k] for k in ("source", "reason", "records", "batches", "pending_release")} == {
        "source": prefix,
        "reason": reason,
        "records": 2,
        "batches": [first.batch_id, second.batch_id],
        "pending_release": None,
    }

    # evolve is refused while the lake column is still a string, naming the table and the fix
    refused = _cli(spark_lake_dir, "quarantine", "release", ident, "--action", "evolve")
    assert refused.exit_code == 1 and isinstance(refused.exception, QuarantineReleaseError)
    assert str(refused.exception).startswith(f"{ident}: column name is still STRING, the held events carry BIGINT.")
    missing = _cli(spark_lake_dir, "quarantine", "release", f"{ident}_nope", "--action", "evolve")
    assert isinstance(missing.exception, QuarantineReleaseError) and "is not quarantined" in str(missing.exception)
    assert ingest([]).batch_id is None  # nothing new and no release: no batch

    # the user keeps the old strings aside and adds the column with its new type, then releases
    spark.sql(f"ALTER TABLE {ident} RENAME COLUMN name TO name_old")
    spark.sql(f"ALTER TABLE {ident} ADD COLUMN name BIGINT")
    released = _cli(spark_lake_dir, "quarantine", "release", prefix + ".inventory.items", "--action", "evolve")
    assert released.exit_code == 0, released.output
    assert _listed(spark_lake_dir, ident)[0]["pending_release"]["action"] == "evolve"

    # the next batch applies the held events with its own, in position order
    items.update({"id": 2, "name": 6, "qty": 2}, lsn=400)
    third = ingest(items.take())
    result = third.tables[ident]
    assert result["quarantined"] is None
    assert result["released"] == {"action": "evolve", "records": 2, "batches": [first.batch_id, second.batch_id]}
    assert (result["decoded"], result["applied_by_op"]) == ({"c": 2, "u": 1}, {"c": 1, "u": 1})
    assert rows(spark, prefix, cols="id, name_old, name, qty") == [(1, "a", None, 1), (2, None, 6, 2), (3, None, 7, 3)]
    assert _releases(spark, ident) == [
        ("evolve", "requested", None, 2, [], None),
        ("evolve", "applied", third.batch_id, 2, [first.batch_id, second.batch_id], None),
    ]
    assert _listed(spark_lake_dir, ident) == []
    audit = spark.sql(
        f"SELECT kind, detail FROM lake.cdc_audit.schema_changes WHERE batch_id = '{third.batch_id}'"
    ).collect()
    assert sorted((r["kind"], r["detail"]) for r in audit) == [
        ("lake_evolution", "column_missing_in_source name_old: STRING -> -"),
        ("quarantine_released", json.dumps(result["released"], sort_keys=True)),
    ]

    # the per-table counts of that batch, as typed columns of the ledger
    counts = spark.sql(
        "SELECT c.* FROM lake.cdc_audit.batches LATERAL VIEW explode(table_counts) x AS c "
        f"WHERE batch_id = '{third.batch_id}' AND status = 'committed' ORDER BY c.op"
    ).collect()
    assert [r.asDict() for r in counts] == [
        {
            "table": ident,
            "op": op,
            "decoded": d,
            "held": 0,
            "applied": 1,
            "skipped": 0,
            "quarantined": 0,
            "dead_lettered": 0,
        }
        for op, d in (("c", 2), ("u", 1))
    ]

    audited = _cli(spark_lake_dir, "audit", prefix, "--tables", "--json", "-n", "1")
    assert audited.exit_code == 0, audited.output
    (last,) = json.loads(audited.output)
    assert (last["batch_id"], last["table_counts"]) == (third.batch_id, [r.asDict() for r in counts])

    # released: its events are applied as they come
    items.create({"id": 4, "name": 8, "qty": 4}, lsn=500)
    fourth = ingest(items.take())
    assert fourth.tables[ident]["applied"] == 1 and fourth.as_dict()["checks"]["ok"] is True
    assert ingest([]).batch_id is None


def test_release_with_recreate_rebuilds_the_table_from_its_events_even_without_new_records(
    spark: SparkSession, spark_lake_dir: Path, prefix: str, ingest: RunBatch
) -> None:
    source = SourceConfig(
        name=prefix,
        topic_prefix=prefix,
        tables={"inventory.items": LakeOptions(schema_policy=SchemaPolicy.QUARANTINE)},
    )
    items = PgTable(prefix=prefix, table="items")
    ident = f"lake.{prefix}.inventory.items"
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    items.create({"id": 2, "name": "b", "qty": 1}, lsn=101)
    items.delete({"id": 2}, lsn=110)
    ingest(items.take(), source=source)
    items.columns = {**items.columns, "note": "string"}  # any change quarantines under this policy
    items.create({"id": 3, "name": "c", "qty": 3, "note": "n"}, lsn=200)
    held = ingest(items.take(), source=source)
    assert held.tables[ident]["quarantined"] == f"{ident}: cannot evolve (quarantine): add_column note: - -> STRING"

    released = _cli(spark_lake_dir, "quarantine", "release", ident, "--action", "recreate", "--note", "rebuild")
    assert released.exit_code == 0, released.output
    # a batch runs for the release although Kafka has nothing new
    batch = ingest([], source=source)
    assert (batch.batch_id is not None, batch.records) == (True, 0)
    assert batch.tables[ident]["released"]["action"] == "recreate"
    assert rows(spark, prefix, cols="id, name, qty, note") == [(3, "c", 3, "n")]
    aside = f"{ident}{replaced_suffix(batch.batch_id)}"
    assert [tuple(r) for r in spark.sql(f"SELECT id, name, qty FROM {aside}").collect()] == [(1, "a", 1)]
    assert spark.sql(f"SELECT count(*) FROM {ident}__cdc_deletes").first()[0] == 0  # a new, empty side table
    assert [r[:2] for r in _releases(spark, ident)] == [("recreate", "requested"), ("recreate", "applied")]
    assert ingest([], source=source).batch_id is None

    # a re-snapshot brings back the rows that had no change since
    items.read({"id": 1, "name": "a", "qty": 1, "note": None}, lsn=300)
    ingest(items.take(), source=source)
    assert rows(spark, prefix, cols="id, name, qty, note") == [(1, "a", 1, None), (3, "c", 3, "n")]


def test_a_release_whose_held_records_change_schema_again_fails_and_keeps_them_held(
    spark: SparkSession, spark_lake_dir: Path, prefix: str, ingest: RunBatch
) -> None:
    items = PgTable(prefix=prefix, table="items")
    ident, topic = f"lake.{prefix}.inventory.items", f"{prefix}.inventory.items"
    items.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(items.take())
    items.columns = {"id": "int64", "name": "int64", "qty": "int32"}
    items.create({"id": 2, "name": 5, "qty": 2}, lsn=200)  # offset 1: quarantined
    ingest(items.take())
    items.columns = {"id": "int64", "name": "string", "qty": "int32"}
    items.create({"id": 3, "name": "c", "qty": 3}, lsn=300)  # offset 2: held (the table is quarantined)
    ingest(items.take())
    assert _cli(spark_lake_dir, "quarantine", "release", ident, "--action", "recreate").exit_code == 0

    # the held records hold two incompatible schemas (bigint, then string again): the decoder cuts at
    # offset 2, before this batch's own record (offset 3); the release fails and nothing moves back
    items.create({"id": 4, "name": "d", "qty": 4}, lsn=400)
    failed = ingest(items.take())
    assert failed.tables[ident]["quarantined"].startswith(f"{ident}: cannot evolve (evolve)")
    detail = f"the held records change schema incompatibly at {topic}/0 offset 2"
    assert _releases(spark, ident)[-1][:2] == ("recreate", "failed")
    assert _releases(spark, ident)[-1][5].startswith(detail)
    assert "release it with --action discard" in _releases(spark, ident)[-1][5]
    assert rows(spark, prefix) == [(1, "a", 1)]  # not set aside, nothing applied
    (listed,) = _listed(spark_lake_dir, ident)
    assert (listed["pending_release"], listed["last_failed_release"]["status"]) == (None, "failed")
    offsets = spark.sql(
        f"SELECT next_offsets FROM lake.cdc_audit.batches WHERE batch_id = '{failed.batch_id}' AND status = 'committed'"
    ).first()[0]
    assert json.loads(offsets)[topic] == {"0": 3}  # this batch's own record is read again by the next one
    held = ingest([])
    assert held.tables[ident]["events"] == {"c": 1}
    assert ingest([]).batch_id is None


def test_a_discard_release_moves_the_held_records_to_the_dead_letters_and_resumes_the_table(
    spark: SparkSession, spark_lake_dir: Path, prefix: str, ingest: RunBatch
) -> None:
    """Held records that no release can apply (two incompatible changes): discard them, keep the tables going.

    Two tables released together: ``items`` has a new event in the releasing batch, ``parts`` has none.
    """
    items, parts = PgTable(prefix=prefix, table="items"), PgTable(prefix=prefix, table="parts")
    for table in (items, parts):
        table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    ingest(items.take(), parts.take())
    held_in: list[str] = []
    for lsn, name_type, name in ((200, "int64", 5), (300, "string", "c")):  # offset 1 quarantines, 2 is held
        for table in (items, parts):
            table.columns = {"id": "int64", "name": name_type, "qty": "int32"}
            table.create({"id": lsn // 100, "name": name, "qty": 2}, lsn=lsn)
        held_in.append(ingest(items.take(), parts.take()).batch_id)
    releases = {}
    for table in ("items", "parts"):
        ident = f"lake.{prefix}.inventory.{table}"
        released = _cli(spark_lake_dir, "quarantine", "release", ident, "--action", "discard", "--note", "unusable")
        assert released.exit_code == 0, released.output
        assert "copied to lake.cdc_audit.dead_letters" in released.output
        (listed,) = _listed(spark_lake_dir, ident)
        releases[table] = (ident, listed["pending_release"]["release_id"], listed["reason"])

    # one batch: both tables' held records dead-lettered once; items takes its new event (string names, as
    # the lake has them), parts has no event of its own
    items.create({"id": 4, "name": "d", "qty": 4}, lsn=400)
    batch = ingest(items.take())
    for table, new in (("items", [(4, "d", 4)]), ("parts", [])):
        ident, release_id, reason = releases[table]
        topic = f"{prefix}.inventory.{table}"
        dead = spark.sql(
            "SELECT topic, `partition`, `offset`, reason, batch_id FROM lake.cdc_audit.dead_letters "
            f"WHERE topic = '{topic}' ORDER BY `offset`"
        ).collect()
        expected = f"discarded by release {release_id}: {reason}"
        assert [tuple(r) for r in dead] == [(topic, 0, o, expected, batch.batch_id) for o in (1, 2)]
        detail = "2 held record(s) discarded into lake.cdc_audit.dead_letters"
        assert _releases(spark, ident)[-1] == ("discard", "applied", batch.batch_id, 2, held_in, detail)
        assert _listed(spark_lake_dir, ident) == []
        assert rows(spark, prefix, table=table) == [(1, "a", 1), *new]
        # the held records are still kept where they were held (nothing is ever deleted)
        assert spark.sql(f"SELECT count(*) FROM lake.cdc_audit.quarantine WHERE `table` = '{ident}'").first()[0] == 2
    result = batch.tables[releases["items"][0]]
    assert (result["quarantined"], result["applied"]) == (None, 1)
    assert result["released"] == {"action": "discard", "records": 2, "batches": held_in}
    assert releases["parts"][0] not in batch.tables
    assert ingest([]).batch_id is None

    # released: later events of both tables are applied as they come
    parts.create({"id": 5, "name": "e", "qty": 5}, lsn=500)
    assert ingest(parts.take()).tables[releases["parts"][0]]["applied"] == 1
    assert rows(spark, prefix, table="parts") == [(1, "a", 1), (5, "e", 5)]
