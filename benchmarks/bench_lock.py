"""A follower's source lock over many batches: the time to take and to give back the lock (prints figures).

Each batch of ``cdclake ingest --follow`` takes the source's lock (``cdc_audit.locks``, :mod:`cdclake.ingest.lock`)
and gives it back. This script does that ``--locks`` times in a row on a fresh embedded lake, and prints the median
acquire and release of each hundred. ``--no-tidy`` leaves every lock's rows in the table (a release then deletes
nothing: only its snapshots are expired), to show what an acquire costs when it reads them all.

Usage: ``.venv/bin/python benchmarks/bench_lock.py [--locks 400] [--no-tidy]`` (no stack needed).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locks", type=int, default=400)
    parser.add_argument("--no-tidy", action="store_true", help="keep every lock's rows")
    args = parser.parse_args()

    from cdclake.ingest import lock
    from cdclake.lake import LakeConfig

    lake = LakeConfig.embedded(Path(tempfile.mkdtemp(prefix="bench-lock-")) / "lake")
    lake.ensure_dirs()
    catalog = lake.open_catalog()
    owner = lock.Owner.this_process("bench_lock")
    times: list[tuple[float, float]] = []
    for i in range(args.locks):
        t0 = time.monotonic()
        held = lock.SourceLock(catalog, "bench", owner, tidy_after_rows=2**62 if args.no_tidy else lock.TIDY_AFTER_ROWS)
        held.acquire(wait_s=0)
        t1 = time.monotonic()
        held.release()
        times.append((t1 - t0, time.monotonic() - t1))
        if (i + 1) % 100 == 0 or i + 1 == args.locks:
            last = times[-100:]
            rows = len(catalog.load_table(("cdc_audit", lock.LOCKS)).scan().to_arrow())
            print(
                f"locks {i + 1}: acquire median {statistics.median(a for a, _ in last):.3f} s, release median "
                f"{statistics.median(r for _, r in last):.3f} s (max of both {max(a + r for a, r in last):.3f} s); "
                f"the table holds {rows} rows",
                flush=True,
            )


if __name__ == "__main__":
    main()
