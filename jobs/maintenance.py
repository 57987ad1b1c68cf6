"""spark-submit entry point: Iceberg maintenance for the lake tables of connector specs.

    spark-submit jobs/maintenance.py --spec postgres [--spec mariadb] [--table inventory.orders]
        [--lake DIR] [--dry-run] [--expire-older-than-days N] [--retain-last K]
        [--orphan-older-than-days N] [--rewrite-min-input-files N] [--tombstone-retention-days N]
        [--skip-audit] [--summary-json PATH]

Each table of each spec gets :func:`cdclake.lake.maintenance.policy_for` (its lake options plus the
overrides given here) and the procedures of :func:`maintenance_calls`. An upsert table's tombstone
side table (``<table>__cdc_deletes``) first loses the tombstones older than the retention
(:func:`tombstone_calls`), then gets the same procedures. Tables that are not in the lake yet are
skipped. A spec's tables are maintained while the job holds the source's lock (:mod:`cdclake.ingest.lock`),
so that no batch of the source writes to them meanwhile (it waits up to ``--lock-wait`` seconds for a running
batch; a source still busy then is reported under ``failed``). Then the lake's audit tables
(``lake.cdc_audit.*``, shared by every source) get :func:`audit_policy_of` with the same overrides, unless
``--skip-audit`` or ``--table`` is given.
A failing table does not stop the others (:func:`run_table`), unless the Spark driver ran out of memory or
exited: the job then stops, with that table's entry under ``failed`` saying which setting to change. The exit
code is 1 when any failed.
The summary JSON is ``{"tables": {identifier: {procedure: [rows]}}, "skipped": [...], "failed": {identifier: error}}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdclake.connectors import ConnectorSpec, load_spec
from cdclake.exceptions import SourceBusyError, SparkDriverError
from cdclake.ingest.lock import DEFAULT_WAIT_S, source_lock
from cdclake.lake import LakeConfig
from cdclake.lake import rows as lake_rows
from cdclake.lake.maintenance import (
    MaintenanceCall,
    MaintenancePolicy,
    audit_identifiers,
    audit_policy_of,
    maintenance_calls,
    policy_for,
    run_table,
    tombstone_calls,
)
from cdclake.lake.names import spec_table_identifier, tombstone_identifier
from cdclake.spark import build_spark_session, driver_exited, driver_failure, more_heap_advice

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("cdclake.jobs.maintenance")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="maintenance", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", action="append", required=True, help="connector spec name or path (repeatable)")
    parser.add_argument("--table", action="append", default=[], help="only this data collection (repeatable)")
    parser.add_argument("--lake", help="embedded lake directory (default: CDC_LAKE_DIR / .lake)")
    parser.add_argument("--dry-run", action="store_true", help="only list orphan files; change nothing")
    parser.add_argument("--expire-older-than-days", type=float)
    parser.add_argument("--retain-last", type=int)
    parser.add_argument("--orphan-older-than-days", type=float)
    parser.add_argument("--rewrite-min-input-files", type=int)
    parser.add_argument("--tombstone-retention-days", type=float, help="keep delete tombstones this many days")
    parser.add_argument(
        "--skip-audit", action="store_true", help="leave the lake's audit tables (lake.cdc_audit.*) alone"
    )
    parser.add_argument("--summary-json", help="write the summary here")
    parser.add_argument(
        "--lock-wait", type=float, default=DEFAULT_WAIT_S, help="seconds to wait for a source's running batch"
    )
    return parser.parse_args(argv)


def _table_calls(
    spark: SparkSession, identifier: str, policy: MaintenancePolicy, now: datetime, prefix_listing: bool
) -> list[tuple[str, list[MaintenanceCall]]]:
    """The table's calls, then its tombstone side table's (expired tombstones first), when it has one."""
    out = [(identifier, maintenance_calls(identifier, policy, now, prefix_listing=prefix_listing))]
    side = tombstone_identifier(identifier)
    if spark.catalog.tableExists(side):
        side_calls = maintenance_calls(side, policy, now, prefix_listing=prefix_listing)
        out.append((side, [*tombstone_calls(identifier, policy, now), *side_calls]))
    return out


def _maintain_spec(
    spark: SparkSession,
    spec: ConnectorSpec,
    tables: list[str],
    overrides: dict[str, Any],
    now: datetime,
    summary: dict[str, Any],
    prefix_listing: bool,
) -> None:
    """Every table of one spec (or only ``tables``) that is in the lake."""
    for data_collection in spec.table_names:
        if tables and data_collection not in tables:
            continue
        identifier = spec_table_identifier(spec, data_collection)
        if not spark.catalog.tableExists(identifier):
            logger.info("skipping %s: not in the lake yet", identifier)
            summary["skipped"].append(identifier)
            continue
        policy = policy_for(spec.table(data_collection).lake, overrides)
        for name, calls in _table_calls(spark, identifier, policy, now, prefix_listing):
            _run_table(spark, name, calls, summary)


def _run_table(spark: SparkSession, name: str, calls: list[MaintenanceCall], summary: dict[str, Any]) -> None:
    """:func:`run_table` with this session's driver checks (:func:`driver_failure`, :func:`more_heap_advice`)."""
    run_table(
        spark, name, calls, summary, driver_lost=lambda exc: driver_failure(spark, exc), heap_advice=more_heap_advice()
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    overrides = {
        "expire_older_than_days": args.expire_older_than_days,
        "retain_last": args.retain_last,
        "orphan_older_than_days": args.orphan_older_than_days,
        "rewrite_min_input_files": args.rewrite_min_input_files,
        "tombstone_retention_days": args.tombstone_retention_days,
        "dry_run": args.dry_run or None,
    }
    specs = [load_spec(name) for name in args.spec]
    lake = LakeConfig.from_env(args.lake)
    spark = build_spark_session("cdclake-maintenance", lake=lake)
    now = datetime.now(UTC)
    # a REST lake lists its files through its FileIO (S3FileIO knows s3://, Hadoop here does not)
    prefix_listing = lake.kind == "rest"
    summary: dict[str, Any] = {"tables": {}, "skipped": [], "failed": {}}
    try:
        for spec in specs:
            try:
                with source_lock(lake_rows.session_catalog(spark), spec.name, wait_s=args.lock_wait):
                    _maintain_spec(spark, spec, args.table, overrides, now, summary, prefix_listing)
            except SourceBusyError as exc:
                logger.error("maintenance of %s skipped: %s", spec.name, exc)
                summary["failed"][spec.name] = str(exc)
        if not (args.skip_audit or args.table):
            for name in audit_identifiers(spark):
                calls = maintenance_calls(name, audit_policy_of(name, overrides), now, prefix_listing=prefix_listing)
                _run_table(spark, name, calls, summary)
    except SparkDriverError:
        pass  # run_table logged it and put it in the summary; the session cannot maintain the tables left
    finally:
        if driver_exited(spark) is None:  # a JVM that exited cannot be asked to stop
            spark.stop()
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    logger.info(
        "maintenance done: %d table(s), %d skipped, %d failed",
        len(summary["tables"]),
        len(summary["skipped"]),
        len(summary["failed"]),
    )
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
