"""Figures for the driver JVM's start with and without the class-data sharing archive (cdclake.cds).

Usage: .venv/bin/python benchmarks/bench_start.py [--runs 3] [--events 120]

Writes a recorded workload (one upsert table, ``--events`` changes), then, alternating
``CDC_SPARK_CDS=off`` and ``auto`` (the archive `cdclake spark cds` wrote; written first if missing):
``cdclake replay --max-records 25`` of the whole workload into a fresh lake (cold: start plus five
small batches), and ``--runs`` times the same replay again with nothing new to do (start, open the lake,
plan). Each figure is the wall time of the `cdclake` process. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "ingest"))

from events import PgTable  # noqa: E402

from cdclake import cds  # noqa: E402

CDCLAKE = str(Path(sys.executable).parent / "cdclake")
MODES = ("off", "auto")


def _workload(path: Path, events: int) -> None:
    table = PgTable(prefix="bstart", table="items")
    for i in range(events):
        table.create({"id": i, "name": f"n{i}", "qty": i}, lsn=1000 + 10 * i)
    path.write_text("".join(json.dumps(r) + "\n" for r in table.take()))


def _replay(workload: Path, lake: Path, mode: str) -> float:
    env = dict(os.environ, CDC_SPARK_CDS=mode, CDC_LOG_LEVEL="WARNING")
    started = time.monotonic()
    cmd = [CDCLAKE, "replay", str(workload), "--lake", str(lake), "--topic-prefix", "bstart", "--max-records", "25"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"replay failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="no-op replays per mode")
    parser.add_argument("--events", type=int, default=120, help="changes in the workload")
    args = parser.parse_args()
    built = cds.build_archive()
    state = f"written in {built.seconds:.0f}s" if built.built else "present"
    print(f"archive {built.path} ({built.size / 2**20:.0f} MiB), {state}")
    work = Path(tempfile.mkdtemp(prefix="bench-start-"))
    try:
        workload = work / "workload.jsonl"
        _workload(workload, args.events)
        cold = {mode: _replay(workload, work / f"lake-{mode}", mode) for mode in MODES}
        warm: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(args.runs):
            for mode in MODES:
                warm[mode].append(_replay(workload, work / f"lake-{mode}", mode))
        for mode in MODES:
            print(
                f"CDC_SPARK_CDS={mode:4}  fresh lake, {args.events} events in batches of 25: {cold[mode]:5.1f} s   "
                f"nothing to do: median {statistics.median(warm[mode]):5.1f} s "
                f"({', '.join(f'{t:.1f}' for t in warm[mode])})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
