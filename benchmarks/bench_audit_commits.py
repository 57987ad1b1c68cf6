"""The ledger's per-batch cost as it grows: one small pyiceberg append (what the ledger, the transaction audit and
the source lock commit per batch) and one read of a source's last batches, as appends accumulate (prints figures;
asserts nothing).

A table of the ledger's shape on an embedded lake (SQLite catalog, local files); ``--appends`` appends of one row,
each on a freshly loaded table as the job does; at a few counts, the append's time (median of the last 10) and one
read of the source's newest rows, and the table's data files. Three tables side by side:

* **as pyiceberg leaves it**: every snapshot kept, a manifest per append; the read scans the source's rows;
* **as cdclake keeps it**: appended in :func:`cdclake.lake.rows.transaction` (its staged metadata worked out once
  per update), then :func:`cdclake.lake.rows.tidy_snapshots` (what
  :func:`cdclake.lake.rows.append_rows` runs), manifests merged (:data:`cdclake.lake.rows.APPEND_TABLE_PROPERTIES`);
  the read starts at the last committed batch's ``seq`` (:func:`cdclake.ingest.ledger.rows_from`, as
  :meth:`cdclake.ingest.ledger.BatchLedger.last` reads after its first read);
* **compacted every N appends** (``--compact-every``, 100 as a follower does): kept so, and its recent files
  compacted through Spark (:func:`cdclake.lake.maintenance.compact_recent_files`, what
  :class:`cdclake.ingest.follow.TableUpkeep` runs on the audit tables); the compaction's seconds are counted in
  the append it follows.

Usage: ``.venv/bin/python benchmarks/bench_audit_commits.py [--appends 1000] [--compact-every 100]
[--skip-pyiceberg]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def run(
    appends: int, kept: bool, compact_every: int | None = None, compactions: list[float] | None = None
) -> dict[int, tuple[float, float, int]]:
    """Per count of appends: (append seconds, median of the last 10; read seconds; data files). With
    ``compact_every``, the table is compacted after every this many appends as a follower compacts it (Spark,
    :func:`cdclake.lake.maintenance.compact_recent_files`), its seconds counted in that append's and added to
    ``compactions``."""
    import pyarrow as pa

    from cdclake.ingest.ledger import rows_from
    from cdclake.lake import LakeConfig
    from cdclake.lake import rows as lake_rows

    lake = LakeConfig.embedded(Path(tempfile.mkdtemp(prefix="cdclake-bench-audit-")))
    lake.ensure_dirs()
    catalog = lake.open_catalog()
    spark = None
    if compact_every:
        from cdclake.spark import build_spark_session

        spark = build_spark_session("bench-audit-commits", lake=lake)
    catalog.create_namespace("cdc_audit")
    schema = pa.schema([("source", pa.string()), ("batch_id", pa.string()), ("seq", pa.int64())])
    properties = lake_rows.APPEND_TABLE_PROPERTIES if kept else {}
    catalog.create_table(("cdc_audit", "batches"), schema, properties=properties)
    marks = {m for m in (10, 100, 200, 500, 1000, 2000, 5000) if m <= appends} | {appends}
    seconds: list[float] = []
    out = {}
    for i in range(1, appends + 1):
        row = pa.table({"source": ["pg"], "batch_id": [f"b{i}"], "seq": [i]}, schema=schema)
        t0 = time.monotonic()
        table = catalog.load_table(("cdc_audit", "batches"))
        if kept:
            with lake_rows.transaction(table) as tx:
                tx.append(row, snapshot_properties={"cdc.batch-id": f"b{i}"})
            lake_rows.tidy_snapshots(table)
        else:
            table.append(row, snapshot_properties={"cdc.batch-id": f"b{i}"})
        if spark is not None and compact_every and i % compact_every == 0:
            from cdclake.lake.maintenance import compact_recent_files

            started = time.monotonic()
            compact_recent_files(spark, "lake.cdc_audit.batches", deletes=False)
            if compactions is not None:
                compactions.append(time.monotonic() - started)
        seconds.append(time.monotonic() - t0)
        if i in marks:
            t0 = time.monotonic()
            table = catalog.load_table(("cdc_audit", "batches"))
            table.scan(row_filter=rows_from("pg", i - 1 if kept else None)).to_arrow()
            read_s = time.monotonic() - t0
            files = len(table.inspect.files())
            out[i] = (statistics.median(seconds[-10:]), read_s, files)
    if spark is not None:
        spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument(
        "--compact-every",
        type=int,
        default=100,
        help="a third table, kept as cdclake keeps it and compacted after every this many appends (0: none)",
    )
    parser.add_argument(
        "--skip-pyiceberg", action="store_true", help="leave out the table as pyiceberg leaves it (slow past 1,000)"
    )
    args = parser.parse_args()
    grown = None if args.skip_pyiceberg else run(args.appends, kept=False)
    kept = run(args.appends, kept=True)
    compactions: list[float] = []
    compacted = (
        run(args.appends, kept=True, compact_every=args.compact_every, compactions=compactions)
        if args.compact_every
        else None
    )

    def cells(figures: dict[int, tuple[float, float, int]] | None, n: int) -> list[str]:
        return (
            ["", "", ""] if figures is None else [f"{figures[n][0]:.3f}", f"{figures[n][1]:.3f}", f"{figures[n][2]:,}"]
        )

    print(
        "| appends so far | as pyiceberg leaves it: append, s | read, s | data files | as cdclake keeps it: "
        f"append, s | read, s | data files | compacted every {args.compact_every}: append, s | read, s | data files |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sorted(kept):
        print("| " + " | ".join([f"{n:,}", *cells(grown, n), *cells(kept, n), *cells(compacted, n)]) + " |")
    if compactions:
        later = compactions[1:] or compactions  # the first pays for a fresh session
        print(
            f"compactions of {args.compact_every} appends' files: the first {compactions[0]:.2f} s (a fresh session), "
            f"then median {statistics.median(later):.2f} s, {min(later):.2f}-{max(later):.2f} s"
        )


if __name__ == "__main__":
    main()
