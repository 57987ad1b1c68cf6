"""Figures for the local stack (Airflow included): `stack up` time from a warm cache, idle memory and CPU.

Usage: .venv/bin/python benchmarks/bench_stack.py [--runs 3] [--idle-seconds 60]

Stops the stack if it runs, then times `up` (data directories already initialised, jars cached, Airflow's
metadata database migrated) ``--runs`` times, then waits ``--idle-seconds`` and prints, per service, its
resident memory (RSS), its proportional memory (PSS: pages shared between processes, such as Airflow's
forked workers, counted once) and the CPU its process tree used while idle. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from cdclake.stack import Stack
from cdclake.stack.process import _descendants

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system) of ``pid`` and its live descendants."""
    if pid is None:
        return 0.0
    total = 0
    for p in _descendants(pid) | {pid}:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / _TICKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args()
    stack = Stack()
    durations = []
    for run in range(args.runs):
        stack.down()
        t0 = time.monotonic()
        stack.up()
        durations.append(time.monotonic() - t0)
        print(f"run {run + 1}: stack up {durations[-1]:.1f}s")
    print(
        f"stack up (warm cache, {args.runs} runs): median {statistics.median(durations):.1f}s, max {max(durations):.1f}s"
    )
    services = stack.services
    before = {name: _cpu_seconds(s.process.pid()) for name, s in services.items()}
    time.sleep(args.idle_seconds)
    cpu = {name: _cpu_seconds(s.process.pid()) - before[name] for name, s in services.items()}
    rss = pss = 0
    for row in stack.status():
        rss, pss = rss + row.rss_bytes, pss + row.pss_bytes
        share = 100 * cpu.get(row.name, 0.0) / args.idle_seconds
        print(
            f"idle {row.name:>21}: RSS {row.rss_bytes / 2**20:6.0f} MiB, PSS {row.pss_bytes / 2**20:6.0f} MiB, "
            f"CPU {share:5.1f}% of one core"
        )
    print(f"idle total: RSS {rss / 2**30:.2f} GiB, PSS {pss / 2**30:.2f} GiB (after {args.idle_seconds:.0f}s idle)")
    print(
        f"idle CPU: {100 * sum(cpu.values()) / args.idle_seconds:.1f}% of one core (the machine has {os.cpu_count()})"
    )


if __name__ == "__main__":
    main()
