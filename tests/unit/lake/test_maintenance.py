"""Iceberg maintenance: the policy and the CALL statements (pure), then the procedures on a tiny table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from driver_failures import exhaust_the_driver_heap

from cdclake.connectors import LakeOptions
from cdclake.exceptions import ConfigError, SparkDriverError
from cdclake.lake.maintenance import (
    RECENT_FILES_POLICY,
    REMOVES_ROWS_ONLY,
    MaintenanceCall,
    MaintenancePolicy,
    audit_identifiers,
    audit_policy,
    compact_recent_files,
    maintenance_calls,
    policy_for,
    run_calls,
    run_table,
    tombstone_calls,
)
from cdclake.lake.names import tombstone_identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NOW = datetime(2026, 11, 21, 6, 0, 0, tzinfo=UTC)


def test_policy_defaults_and_append_tables_skip_position_deletes() -> None:
    assert policy_for(LakeOptions()) == MaintenancePolicy()
    assert policy_for(LakeOptions(mode="append")) == MaintenancePolicy(
        rewrite_position_deletes=False, expire_tombstones=False
    )


def test_tombstone_retention_comes_from_the_spec_and_only_upsert_tables_have_tombstones() -> None:
    assert MaintenancePolicy().tombstone_retention_days == 7.0
    assert policy_for(LakeOptions(tombstone_retention_days=2)).tombstone_retention_days == 2.0
    assert (
        policy_for(LakeOptions(tombstone_retention_days=2), {"tombstone_retention_days": 0.5}).tombstone_retention_days
        == 0.5
    )
    assert policy_for(LakeOptions(tombstone_retention_days=None)).expire_tombstones is False  # kept forever
    assert policy_for(LakeOptions(mode="scd2")).expire_tombstones is False
    with pytest.raises(ConfigError, match="tombstone_retention_days must be >= 0"):
        policy_for(None, {"tombstone_retention_days": -1})


def test_tombstone_statements_delete_by_ingest_time() -> None:
    assert tombstone_identifier("pg.inventory.customers") == "lake.pg.inventory.customers__cdc_deletes"
    side = "pg.inventory.customers__cdc_deletes"
    expired = "_cdc_deleted_at < TIMESTAMP '2026-11-19 18:00:00.000000'"
    policy = MaintenancePolicy(tombstone_retention_days=1.5)
    assert tombstone_calls("lake.pg.inventory.customers", policy, NOW) == [
        MaintenanceCall(
            "count_expired_tombstones",
            side,
            f"SELECT count(*) AS expired FROM lake.`pg`.`inventory`.`customers__cdc_deletes` WHERE {expired}",
        ),
        MaintenanceCall(
            "expire_tombstones",
            side,
            f"DELETE FROM lake.`pg`.`inventory`.`customers__cdc_deletes` WHERE {expired}",
            # its commit keeps the side table's position ceiling found (cdclake.ingest.tables.position_ceiling)
            {REMOVES_ROWS_ONLY: "true"},
        ),
    ]
    # a dry run only counts; no expiry, no statement
    dry = tombstone_calls("pg.inventory.customers", MaintenancePolicy(dry_run=True), NOW)
    assert [c.procedure for c in dry] == ["count_expired_tombstones"]
    assert tombstone_calls("pg.inventory.customers", MaintenancePolicy(expire_tombstones=False), NOW) == []


def test_policy_overrides_ignore_none_and_reject_unknown_or_invalid_values() -> None:
    policy = policy_for(LakeOptions(), {"retain_last": 2, "expire_older_than_days": None})
    assert (policy.retain_last, policy.expire_older_than_days) == (2, 7.0)
    with pytest.raises(ConfigError, match="unknown key\\(s\\) retain"):
        policy_for(None, {"retain": 1})
    with pytest.raises(ConfigError, match="retain_last must be >= 1"):
        policy_for(None, {"retain_last": 0})
    with pytest.raises(ConfigError, match="orphan_older_than_days must be >= 1"):
        policy_for(None, {"orphan_older_than_days": 0.5})


def test_calls_of_the_default_policy_in_order() -> None:
    calls = maintenance_calls("lake.pg.inventory.customers", MaintenancePolicy(), NOW)
    assert calls == [
        MaintenanceCall(
            "rewrite_data_files",
            "pg.inventory.customers",
            "CALL lake.system.rewrite_data_files(table => 'lake.pg.inventory.customers', strategy => 'binpack', "
            "options => map('min-input-files', '5', 'remove-dangling-deletes', 'true'))",
        ),
        MaintenanceCall(
            "rewrite_position_delete_files",
            "pg.inventory.customers",
            "CALL lake.system.rewrite_position_delete_files(table => 'lake.pg.inventory.customers', "
            "options => map('min-input-files', '5'))",
        ),
        MaintenanceCall(
            "expire_snapshots",
            "pg.inventory.customers",
            "CALL lake.system.expire_snapshots(table => 'lake.pg.inventory.customers', "
            "older_than => TIMESTAMP '2026-11-14 06:00:00.000000', retain_last => 5)",
        ),
        MaintenanceCall(
            "remove_orphan_files",
            "pg.inventory.customers",
            "CALL lake.system.remove_orphan_files(table => 'lake.pg.inventory.customers', "
            "older_than => TIMESTAMP '2026-11-18 06:00:00.000000')",
        ),
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # everything off -> nothing to call
        (
            MaintenancePolicy(
                expire_snapshots=False,
                rewrite_data_files=False,
                rewrite_position_deletes=False,
                remove_orphan_files=False,
            ),
            [],
        ),
        # dry run -> only the orphan listing, flagged dry_run
        (
            MaintenancePolicy(dry_run=True, orphan_older_than_days=1),
            [
                "CALL lake.system.remove_orphan_files(table => 'lake.t.ns.x', "
                "older_than => TIMESTAMP '2026-11-20 06:00:00.000000', dry_run => true)"
            ],
        ),
        # target size is passed as an option; the identifier is quoted as a literal
        (
            MaintenancePolicy(
                target_file_size_bytes=1024,
                rewrite_min_input_files=2,
                expire_snapshots=False,
                rewrite_position_deletes=False,
                remove_orphan_files=False,
            ),
            [
                "CALL lake.system.rewrite_data_files(table => 'lake.t.ns.x', strategy => 'binpack', "
                "options => map('min-input-files', '2', 'target-file-size-bytes', '1024'))"
            ],
        ),
        # a follower's compaction: only the small files, the deletes of rewritten files dropped, then the deletes
        (
            RECENT_FILES_POLICY,
            [
                "CALL lake.system.rewrite_data_files(table => 'lake.t.ns.x', strategy => 'binpack', options => "
                "map('min-input-files', '5', 'min-file-size-bytes', '1048576', 'remove-dangling-deletes', 'true'))",
                "CALL lake.system.rewrite_position_delete_files(table => 'lake.t.ns.x', "
                "options => map('min-input-files', '5'))",
            ],
        ),
    ],
)
def test_calls_follow_the_policy(policy: MaintenancePolicy, expected: list[str]) -> None:
    assert [c.sql for c in maintenance_calls("t.ns.x", policy, NOW)] == expected


def test_quotes_in_identifiers_are_escaped() -> None:
    (call,) = maintenance_calls(
        "lake.p.s.o'x",
        MaintenancePolicy(rewrite_data_files=False, rewrite_position_deletes=False, remove_orphan_files=False),
        NOW,
    )
    assert "table => 'lake.p.s.o\\'x'" in call.sql


@pytest.mark.spark
def test_procedures_run_on_a_tiny_table(spark: SparkSession) -> None:
    table = "lake.mt.ns.orders"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.mt.ns")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    for i in range(4):  # four snapshots, four small data files
        spark.sql(f"INSERT INTO {table} VALUES ({2 * i}, 'a{i}'), ({2 * i + 1}, 'b{i}')")
    spark.sql(f"DELETE FROM {table} WHERE id IN (1, 5)")  # position deletes
    spark.sql(f"DELETE FROM {table} WHERE id = 6")
    before = spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0]
    assert before == 6

    policy = policy_for(
        LakeOptions(),
        {"rewrite_min_input_files": 2, "expire_older_than_days": 0, "retain_last": 1, "orphan_older_than_days": 1},
    )
    results = run_calls(spark, maintenance_calls(table, policy, datetime.now(UTC)))

    assert list(results) == [
        "rewrite_data_files",
        "rewrite_position_delete_files",
        "expire_snapshots",
        "remove_orphan_files",
    ]
    (rewrite,) = results["rewrite_data_files"]
    assert rewrite["rewritten_data_files_count"] >= 4  # one or more per INSERT
    assert rewrite["added_data_files_count"] == 1
    (expired,) = results["expire_snapshots"]
    assert expired["deleted_data_files_count"] >= 4
    assert results["remove_orphan_files"] == []  # nothing unreferenced is older than a day
    # one snapshot left, the data unchanged
    assert spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0] == 1
    rows = sorted(tuple(r) for r in spark.sql(f"SELECT id, v FROM {table}").collect())
    assert rows == [(0, "a0"), (2, "a1"), (3, "b1"), (4, "a2"), (7, "b3")]


@pytest.mark.spark
def test_a_followers_compaction_leaves_one_data_file_per_partition_and_no_dangling_deletes(spark: SparkSession) -> None:
    """What a follower's batches leave in a merge-on-read table (a data file and a position-delete file per
    partition and MERGE), compacted: the same rows, far fewer files."""
    table = "lake.mt.ns.recent"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.mt.ns")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg PARTITIONED BY (bucket(2, id)) TBLPROPERTIES ("
        "'format-version'='2', 'write.merge.mode'='merge-on-read', 'write.delete.mode'='merge-on-read')"
    )
    for batch in range(6):  # each batch: 4 new keys, 1 earlier key updated
        spark.sql(
            f"MERGE INTO {table} t USING (SELECT id, concat('b{batch}-', id) AS v FROM VALUES "
            f"({4 * batch}), ({4 * batch + 1}), ({4 * batch + 2}), ({4 * batch + 3}), ({max(0, 4 * batch - 3)}) AS s(id)) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
    expected = sorted(tuple(r) for r in spark.table(table).collect())

    def files() -> dict[int, int]:
        rows = spark.sql(f"SELECT content, count(*) AS n FROM {table}.files GROUP BY content").collect()
        return {r.content: r.n for r in rows}

    before = files()
    assert before[0] >= 10 and before[1] >= 5  # data files, position-delete files
    results = compact_recent_files(spark, table)

    assert list(results) == ["rewrite_data_files", "rewrite_position_delete_files"]
    after = files()
    assert after[0] == 2  # one per bucket
    assert after.get(1, 0) < before[1] and results["rewrite_data_files"][0]["removed_delete_files_count"] > 0
    assert sorted(tuple(r) for r in spark.table(table).collect()) == expected
    assert compact_recent_files(spark, "lake.mt.ns.absent") == {}


@pytest.mark.spark
def test_tombstones_older_than_the_retention_are_deleted_and_newer_ones_kept(spark: SparkSession) -> None:
    table = "lake.mt.ns.customers"
    side = tombstone_identifier(table)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.mt.ns")
    spark.sql(f"DROP TABLE IF EXISTS {side}")
    # the side table as the ingestion job creates it (cdclake.ingest.tables.TableApplier.ensure_table)
    spark.sql(
        f"CREATE TABLE {side} (`id` BIGINT NOT NULL, _cdc_position ARRAY<DECIMAL(38,0)>, _cdc_deleted_at TIMESTAMP) "
        "USING iceberg TBLPROPERTIES ('format-version'='2', 'write.merge.mode'='merge-on-read')"
    )
    now = datetime.now(UTC)
    ages = {1: timedelta(days=10), 2: timedelta(days=3, hours=1), 3: timedelta(days=2, hours=23), 4: timedelta(0)}
    values = ", ".join(
        f"({key}, array({key}00), TIMESTAMP '{(now - age).strftime('%Y-%m-%d %H:%M:%S')}')" for key, age in ages.items()
    )
    spark.sql(f"INSERT INTO {side} VALUES {values}")
    policy = policy_for(LakeOptions(tombstone_retention_days=3))

    dry = run_calls(
        spark, tombstone_calls(table, policy_for(LakeOptions(tombstone_retention_days=3), {"dry_run": True}), now)
    )
    assert dry == {"count_expired_tombstones": [{"expired": 2}]}
    results = run_calls(spark, tombstone_calls(table, policy, now))

    assert results["count_expired_tombstones"] == [{"expired": 2}]
    kept = sorted((r[0], int(r[1])) for r in spark.sql(f"SELECT id, _cdc_position[0] FROM {side}").collect())
    assert kept == [(3, 300), (4, 400)]


def test_audit_tables_are_append_only_and_take_the_overrides() -> None:
    policy = audit_policy({"retain_last": 2, "expire_older_than_days": None})
    assert (policy.rewrite_position_deletes, policy.expire_tombstones) == (False, False)
    assert (policy.retain_last, policy.expire_older_than_days) == (2, MaintenancePolicy().expire_older_than_days)
    calls = maintenance_calls("lake.cdc_audit.batches", policy, NOW)
    assert [(c.procedure, c.table) for c in calls] == [
        ("rewrite_data_files", "cdc_audit.batches"),
        ("expire_snapshots", "cdc_audit.batches"),
        ("remove_orphan_files", "cdc_audit.batches"),
    ]
    with pytest.raises(ConfigError, match="retain_last"):
        audit_policy({"retain_last": 0})


@pytest.mark.spark
def test_audit_maintenance_compacts_and_expires_the_ledger_and_it_reads_the_same(spark: SparkSession) -> None:
    """The batch ledger after many small commits: fewer files and snapshots, the same last batch."""
    from cdclake.ingest.ledger import COMMITTED, PLANNED, BatchLedger, BatchRecord
    from cdclake.ingest.offsets import OffsetRange

    ledger = BatchLedger(spark, "mt_audit")
    ledger.ensure()
    for seq in range(1, 5):  # two commits per batch, like the job: planned, then committed
        ranges = [OffsetRange("mt.t", 0, 10 * (seq - 1), 10 * seq)]
        for status in (PLANNED, COMMITTED):
            ledger.append(BatchRecord("mt_audit", f"b{seq}", seq, status, ranges, {("mt.t", 0): 10 * seq}))
    before = ledger.last()
    table = "lake.cdc_audit.batches"
    assert table in audit_identifiers(spark)
    files = spark.sql(f"SELECT count(*) FROM {table}.files").first()[0]
    assert files >= 8
    policy = audit_policy({"rewrite_min_input_files": 2, "expire_older_than_days": 0, "retain_last": 1})
    calls = [c for c in maintenance_calls(table, policy, datetime.now(UTC)) if c.procedure != "remove_orphan_files"]
    results = run_calls(spark, calls)
    assert results["rewrite_data_files"][0]["rewritten_data_files_count"] == files
    assert spark.sql(f"SELECT count(*) FROM {table}.files").first()[0] == 1
    assert spark.sql(f"SELECT count(*) FROM {table}.snapshots").first()[0] == 1
    committed, pending = ledger.last()
    assert pending is None and committed is not None
    assert (committed.batch_id, committed.seq, committed.next_offsets) == ("b4", 4, {("mt.t", 0): 40})
    assert (committed.batch_id, committed.next_offsets) == (before[0].batch_id, before[0].next_offsets)


def test_the_lock_table_only_gets_its_orphan_files_removed() -> None:
    from cdclake.lake.maintenance import audit_policy_of

    now = datetime(2026, 1, 10, tzinfo=UTC)
    ledger = [
        c.procedure for c in maintenance_calls("lake.cdc_audit.batches", audit_policy_of("lake.cdc_audit.batches"), now)
    ]
    locks = [
        c.procedure for c in maintenance_calls("lake.cdc_audit.locks", audit_policy_of("lake.cdc_audit.locks"), now)
    ]
    assert ledger == ["rewrite_data_files", "expire_snapshots", "remove_orphan_files"]
    assert locks == ["remove_orphan_files"]


def test_a_lake_on_object_storage_lists_orphans_through_the_tables_file_io() -> None:
    """Hadoop's file systems know no ``s3://`` location here: the REST lake's orphan listing goes through S3FileIO
    (the cluster test runs it on s3proxy: tests/integration/test_cluster_profile.py)."""
    policy = MaintenancePolicy(orphan_older_than_days=3)
    (call,) = [
        c for c in maintenance_calls("t.ns.x", policy, NOW, prefix_listing=True) if c.procedure == "remove_orphan_files"
    ]
    assert call.sql.endswith(", prefix_listing => true)")
    (dry,) = maintenance_calls("t.ns.x", MaintenancePolicy(dry_run=True), NOW, prefix_listing=True)
    assert dry.sql.endswith("dry_run => true, prefix_listing => true)")
    assert all("prefix_listing" not in c.sql for c in maintenance_calls("t.ns.x", policy, NOW))


@pytest.mark.spark
def test_a_failing_table_is_recorded_and_a_driver_out_of_memory_stops_the_run_saying_what_to_change(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.lake import maintenance
    from cdclake.spark import driver_failure, more_heap_advice

    table = "lake.mt.ns.kept"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.mt.ns")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    policy = policy_for(LakeOptions(), {"expire_older_than_days": 0, "retain_last": 1})
    summary: dict[str, Any] = {"tables": {}, "skipped": [], "failed": {}}
    # as jobs/maintenance.py passes them
    lost = {"driver_lost": lambda exc: driver_failure(spark, exc), "heap_advice": more_heap_advice()}

    run_table(spark, table, maintenance_calls(table, policy, datetime.now(UTC)), summary, **lost)
    assert "expire_snapshots" in summary["tables"][table]

    missing = "lake.mt.ns.missing"  # an error of the procedure: recorded, the run goes on
    run_table(spark, missing, maintenance_calls(missing, policy, datetime.now(UTC)), summary, **lost)
    assert missing not in summary["tables"]
    assert summary["failed"][missing]

    monkeypatch.setattr(maintenance, "run_calls", lambda *args, **kwargs: exhaust_the_driver_heap(spark))
    with pytest.raises(SparkDriverError) as stopped:
        run_table(spark, table, maintenance_calls(table, policy, datetime.now(UTC)), summary, **lost)
    message = str(stopped.value)
    assert message.startswith(f"maintenance of {table}: the Spark driver ran out of memory (java.lang.OutOfMemoryError")
    assert "the tables after it were not maintained" in message and "CDC_SPARK_DRIVER_MEMORY" in message
    assert summary["failed"][table] == message
    assert list(summary["failed"]) == [missing, table]
