"""A follower's compaction on the lake a latency run left: what it costs at several size bounds, and what it
gives a reader (prints figures; asserts nothing).

Takes the lake of a ``bench_latency.py --compact-every 0`` run (by default the newest such lake under the
temporary directory) and, for each ``--bounds`` value, runs what ``cdclake.lake.maintenance.compact_recent_files``
runs on ``customers`` with that bound, times both procedures and a reader's scan of the 20K newest keys
(Spark), then rolls the table back to where it was, so every bound starts from the same files.

Usage: ``.venv/bin/python benchmarks/bench_compaction.py [--lake DIR] [--bounds 1048576,4194304]``
(no stack needed).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from cdclake.lake.catalog import LakeConfig
from cdclake.lake.maintenance import RECENT_FILES_POLICY, maintenance_calls
from cdclake.spark import build_spark_session

TABLE = "lake.pg.inventory.customers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", type=Path, default=None, help="a bench_latency.py lake (default: the newest)")
    parser.add_argument("--bounds", default="1048576,4194304", help="size bounds in bytes, comma-separated")
    args = parser.parse_args()
    lakes = sorted(Path(tempfile.gettempdir()).glob("cdclake-bench-latency-*/lake"), key=lambda p: p.stat().st_mtime)
    lake = args.lake or (lakes[-1] if lakes else None)
    if lake is None:
        raise SystemExit("no lake: run benchmarks/bench_latency.py --compact-every 0 first, or give --lake")

    spark = build_spark_session("bench-compaction", lake=LakeConfig.embedded(lake))
    spark.sparkContext.setLogLevel("ERROR")
    start = spark.sql(f"SELECT snapshot_id FROM {TABLE}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]

    def files() -> str:
        rows = spark.sql(
            f"SELECT content, count(*) AS n, percentile_approx(file_size_in_bytes, 0.5) AS median "
            f"FROM {TABLE}.files GROUP BY content ORDER BY content"
        ).collect()
        kinds = {0: "data", 1: "position-delete"}
        return ", ".join(
            f"{r.n:,} {kinds.get(r.content, r.content)} files (median {r.median / 1024:.0f} KiB)" for r in rows
        )

    def scan() -> str:
        times = []
        for _ in range(2):
            t0 = time.monotonic()
            spark.sql(
                f"SELECT count(*), sum(hash(name)) FROM {TABLE} WHERE id > (SELECT max(id) - 20000 FROM {TABLE})"
            ).collect()
            times.append(time.monotonic() - t0)
        return " / ".join(f"{t:.2f}" for t in times) + " s"

    print(f"{lake}: {files()}; a scan of the 20K newest keys, twice: {scan()}")
    for bound in (int(b) for b in args.bounds.split(",")):
        policy = replace(RECENT_FILES_POLICY, rewrite_below_bytes=bound)
        timed = []
        for call in maintenance_calls(TABLE, policy, datetime.now(UTC)):
            t0 = time.monotonic()
            out = spark.sql(call.sql).first()
            timed.append(f"{call.procedure} {time.monotonic() - t0:.2f} s {out.asDict() if out else {}}")
        print(f"bound {bound / 1024 / 1024:g} MiB: " + "; ".join(timed))
        print(f"  after: {files()}; the scan: {scan()}")
        spark.sql(f"CALL lake.system.rollback_to_snapshot('{TABLE.removeprefix('lake.')}', {start})").collect()
    spark.stop()


if __name__ == "__main__":
    main()
