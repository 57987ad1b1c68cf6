"""Figures for the local stack: `stack up` time from a warm cache, and idle RSS.

Usage: .venv/bin/python benchmarks/bench_stack.py [--runs 3] [--idle-seconds 60]

Stops the stack if it runs, then times `up` (data directories already initialised, jars cached)
``--runs`` times, then waits ``--idle-seconds`` and prints the resident memory of every service.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from cdclake.stack import Stack


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
    time.sleep(args.idle_seconds)
    total = 0
    for row in stack.status():
        total += row.rss_bytes
        print(f"idle RSS {row.name:>8}: {row.rss_bytes / 2**20:7.0f} MiB")
    print(f"idle RSS total: {total / 2**30:.2f} GiB (after {args.idle_seconds:.0f}s idle)")


if __name__ == "__main__":
    main()
