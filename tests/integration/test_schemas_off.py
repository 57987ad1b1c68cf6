"""Schemas-off connectors end to end on the local stack: column types read from the live source database.

For PostgreSQL and MariaDB, a test-owned table with a real column mix is captured by a Debezium connector whose
JsonConverter runs with ``schemas.enable=false`` (records carry no ``schema``), and nothing but the spec says
where the types come from (``converters.schema_source`` left at its default, ``database``):

1. ``cdclake ingest`` after the snapshot and a first workload gives a lake equal to the source;
2. two columns are added mid-stream (``ALTER TABLE ... ADD COLUMN``) and written; the next ``cdclake ingest``
   reads the table's catalog again, evolves the lake table, and the lake is equal to the source again;
3. the whole capture (DDL in the middle of it) is replayed into a fresh lake with only the spec: equal again.

Every run must end with exit status 0: a dead-lettered record makes ``cdclake ingest`` exit non-zero.
The module owns its tables, connectors, topics and slot, and removes them at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from owned_sources import cli_ingest, owned_spec_doc, remove_source, write_spec
from pyiceberg.catalog import load_catalog

from cdclake.capture import capture_to_file, prefix_patterns
from cdclake.connect.lifecycle import ensure_connector, wait_running
from cdclake.connectors import ConnectorSpec
from cdclake.databases.schema_source import schema_source_for
from cdclake.demo.database import AppSql, app_sql, apply_demo_schema
from cdclake.demo.topics import topic_end_offsets, wait_for_records
from cdclake.lake import LakeConfig
from cdclake.reconcile import ReconcileReport, lake_identifier, reconcile_source
from cdclake.stack import Stack

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

RUN = secrets.token_hex(3)

PG_DDL = """CREATE TABLE {table} (
  id bigint PRIMARY KEY, name text NOT NULL, code varchar(20), amount numeric(12, 2), placed_at timestamptz,
  local_at timestamp(6), day date, active boolean, doc jsonb, raw bytea, ratio double precision)"""
MARIA_DDL = """CREATE TABLE {table} (
  id bigint PRIMARY KEY, name text NOT NULL, code varchar(20), amount decimal(12, 2), placed_at timestamp(6) NULL,
  local_at datetime(6), day date, active tinyint(1), doc json, raw blob, ratio double)"""
COLUMNS = "id, name, code, amount, placed_at, local_at, day, active, doc, raw, ratio"
ADDED = {
    "postgres": "ADD COLUMN note text, ADD COLUMN qty integer",
    "mariadb": "ADD COLUMN note varchar(50), ADD COLUMN qty int",
}


@dataclass(frozen=True)
class Source:
    which: str  # postgres | mariadb
    spec_path: Path
    spec: ConnectorSpec
    table: str

    @property
    def topic(self) -> str:
        return f"{self.spec.topic_prefix}.{self.table}"


def _spec_file(tmp: Path, which: str) -> Source:
    table = f"{'inventory' if which == 'postgres' else 'demo'}.so_{RUN}_items"
    doc = owned_spec_doc(
        which,
        f"so_{RUN}",
        [{"name": table, "lake": {"mode": "upsert", "schema_policy": "evolve"}}],
        converters={"key_schemas_enable": False, "value_schemas_enable": False},
    )
    path, spec = write_spec(tmp, doc)
    return Source(which, path, spec, table)


def _insert(sql: AppSql, src: Source, rows: list[tuple[Any, ...]]) -> None:
    marks = ", ".join(["%s"] * len(rows[0]))
    sql.executemany(f"INSERT INTO {src.table} ({COLUMNS}) VALUES ({marks})", rows)


def _row(sql: AppSql, i: int) -> tuple[Any, ...]:
    from datetime import UTC, date, datetime
    from decimal import Decimal

    return (
        i,
        f"item {i} ☃" if i % 2 else f"item {i}",
        f"C-{i:04d}" if i % 3 else None,
        Decimal(f"{i * 37}.{i % 100:02d}"),
        datetime(2024, 2, 29, 13, 14, 15, 123456, tzinfo=UTC),
        datetime(2023, 12, 31, 23, 59, 59, 999999),
        date(2000 + i % 30, 1 + i % 12, 1 + i % 28),
        bool(i % 2),
        sql.json({"i": i, "tags": ["a", "b"], "nested": {"n": None}}),
        bytes([i % 256, 0, 255]),
        i / 3,
    )


def _first_workload(sql: AppSql, src: Source) -> int:
    """Inserts, updates and a delete; returns the data events it makes."""
    _insert(sql, src, [_row(sql, i) for i in (10, 11, 12)])
    sql.execute(f"UPDATE {src.table} SET amount = amount + 1, code = NULL WHERE id = %s", [10])
    sql.execute(f"UPDATE {src.table} SET doc = %s WHERE id = %s", [sql.json({"changed": True}), 2])
    sql.execute(f"DELETE FROM {src.table} WHERE id = %s", [3])
    return 6


def _ddl_workload(sql: AppSql, src: Source) -> int:
    """Adds two columns mid-stream and writes them; returns the data events it makes."""
    sql.execute(f"ALTER TABLE {src.table} {ADDED[src.which]}")
    _insert(sql, src, [_row(sql, i) for i in (20, 21)])
    sql.execute(f"UPDATE {src.table} SET note = %s, qty = %s WHERE id IN (%s, %s)", ["added later", 7, 1, 20])
    sql.execute(f"DELETE FROM {src.table} WHERE id = %s", [11])
    return 2 + 2 + 1


def _assert_equal(report: ReconcileReport, rows: int) -> None:
    [table] = report.tables
    assert table.status == "equal", table.as_dict()
    assert table.source_rows == table.lake_rows == rows
    assert table.source_checksum == table.lake_checksum


def _lake_columns(lake: LakeConfig, src: Source) -> list[str]:
    catalog = load_catalog(**lake.pyiceberg_properties())
    schema = catalog.load_table(lake_identifier(src.spec, src.spec.tables[0])).schema()
    return [f.name for f in schema.fields if not f.name.startswith("_cdc")]


@pytest.fixture(scope="module")
def sources(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Source]]:
    """Both connectors registered (schemas off) after a snapshot of three rows and a first workload."""
    tmp = tmp_path_factory.mktemp("schemas-off-specs")
    client = stack.connect_client()
    apply_demo_schema(stack)
    made = {which: _spec_file(tmp, which) for which in ("postgres", "mariadb")}
    bootstrap = stack.config.kafka_bootstrap
    try:
        for src in made.values():
            with app_sql(stack, src.which) as sql:
                sql.execute((PG_DDL if src.which == "postgres" else MARIA_DDL).format(table=src.table))
                _insert(sql, src, [_row(sql, i) for i in (1, 2, 3)])
            ensure_connector(client, src.spec, stack.database_endpoint(src.spec))
        for src in made.values():
            wait_running(client, src.spec.name)
        wait_for_records(bootstrap, {src.topic: 3 for src in made.values()}, timeout_s=240)
        want = {}
        for src in made.values():
            with app_sql(stack, src.which) as sql:
                want[src.topic] = 3 + _first_workload(sql, src)
        wait_for_records(bootstrap, want, timeout_s=240)
        yield made
    finally:
        for src in made.values():
            remove_source(stack, client, src.which, src.spec, (src.table,))


def test_records_carry_no_schema(stack: Stack, sources: dict[str, Source], tmp_path: Path) -> None:
    from cdclake.decode.records import read_record_file

    for src in sources.values():
        path = tmp_path / f"{src.which}.jsonl"
        capture_to_file(stack.config.kafka_bootstrap, [src.topic], path)
        values = [line.record.value for line in read_record_file(path) if line.record.value]
        assert len(values) == 9 and all(v.startswith('{"before":') for v in values), values[:2]


def test_ingest_then_ddl_mid_stream_then_replay_equal_the_source(
    stack: Stack,
    sources: dict[str, Source],
    spark: SparkSession,
    spark_lake_dir: Path,
    tmp_path: Path,
) -> None:
    from cdclake.ingest.runner import replay_files
    from cdclake.lake import rows as lake_rows

    live = tmp_path / "live-lake"
    live_lake = LakeConfig.embedded(live)
    for src in sources.values():
        cli_ingest(src.spec_path, live)
        _assert_equal(reconcile_source(src.spec, lake=live_lake), rows=5)  # 1-3, 10-12, 3 deleted

    bootstrap = stack.config.kafka_bootstrap
    want = {}
    for src in sources.values():
        before = topic_end_offsets(bootstrap, [src.topic])[src.topic]
        with app_sql(stack, src.which) as sql:
            want[src.topic] = before + _ddl_workload(sql, src)
    wait_for_records(bootstrap, want, timeout_s=240)

    for src in sources.values():
        cli_ingest(src.spec_path, live)
        _assert_equal(reconcile_source(src.spec, lake=live_lake), rows=6)  # 20 and 21 added, 11 deleted
        assert _lake_columns(live_lake, src)[-2:] == ["note", "qty"]

    # the whole capture, the DDL inside it, replayed into a fresh lake with the spec alone
    catalog = lake_rows.session_catalog(spark)
    lake = LakeConfig.embedded(spark_lake_dir)
    for which, src in sources.items():
        path = tmp_path / f"{which}.jsonl"
        capture_to_file(bootstrap, prefix_patterns(src.spec.topic_prefix), path)
        batches: list[dict[str, Any]] = []
        replay_files(
            spark,
            [path],
            spec=str(src.spec_path),
            schema_source=partial(schema_source_for, catalog=catalog),
            on_batch=lambda b, out=batches: out.append(b.as_dict()),
        )
        assert batches and sum(b["dead_lettered"] for b in batches) == 0, batches
        _assert_equal(reconcile_source(src.spec, lake=lake), rows=6)
        assert _lake_columns(lake, src)[-2:] == ["note", "qty"]
