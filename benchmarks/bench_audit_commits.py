"""The ledger's per-batch cost as it grows: one small pyiceberg append (what the ledger, the transaction audit and
the source lock commit per batch) and one read of a source's last batches, as appends accumulate (prints figures;
asserts nothing).

A table of the ledger's shape on an embedded lake (SQLite catalog, local files); ``--appends`` appends of one row,
each on a freshly loaded table as the job does; at a few counts, the append's time (median of the last 10) and one
read of the source's newest rows. Two tables side by side:

* **as pyiceberg leaves it**: every snapshot kept, a manifest per append; the read scans the source's rows;
* **as cdclake keeps it**: after each append :func:`cdclake.lake.rows.tidy_snapshots` (what
  :func:`cdclake.lake.rows.append_rows` runs), manifests merged (:data:`cdclake.lake.rows.APPEND_TABLE_PROPERTIES`);
  the read starts at the last committed batch's ``seq`` (:func:`cdclake.ingest.ledger.rows_from`, as
  :meth:`cdclake.ingest.ledger.BatchLedger.last` reads after its first read).

Usage: ``.venv/bin/python benchmarks/bench_audit_commits.py [--appends 1000]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def run(appends: int, kept: bool) -> dict[int, tuple[float, float]]:
    """Per count of appends: (append seconds, median of the last 10; read seconds)."""
    import pyarrow as pa

    from cdclake.ingest.ledger import rows_from
    from cdclake.lake import LakeConfig
    from cdclake.lake import rows as lake_rows

    lake = LakeConfig.embedded(Path(tempfile.mkdtemp(prefix="cdclake-bench-audit-")))
    lake.ensure_dirs()
    catalog = lake.open_catalog()
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
        table.append(row, snapshot_properties={"cdc.batch-id": f"b{i}"})
        if kept:
            lake_rows.tidy_snapshots(table)
        seconds.append(time.monotonic() - t0)
        if i in marks:
            t0 = time.monotonic()
            table = catalog.load_table(("cdc_audit", "batches"))
            table.scan(row_filter=rows_from("pg", i - 1 if kept else None)).to_arrow()
            out[i] = (statistics.median(seconds[-10:]), time.monotonic() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=1000)
    args = parser.parse_args()
    grown, kept = run(args.appends, kept=False), run(args.appends, kept=True)
    print("| appends so far | as pyiceberg leaves it: append, s | read, s | as cdclake keeps it: append, s | read, s |")
    print("|---|---|---|---|---|")
    for n in sorted(grown):
        print(f"| {n:,} | {grown[n][0]:.3f} | {grown[n][1]:.3f} | {kept[n][0]:.3f} | {kept[n][1]:.3f} |")


if __name__ == "__main__":
    main()
