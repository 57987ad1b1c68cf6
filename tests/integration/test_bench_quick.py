"""The real-shape ingestion benchmark's quick mode (``benchmarks/bench_real_shape.py --quick``) on the local stack:
it runs end to end (backlogs generated from the captures and produced, one ``cdclake ingest`` process per
backlog, the plain-Spark limit, the peers on the first backlog) and each lake holds exactly its backlog's final
content: every live key once, each row its key's last write. No figure is asserted.

The peers' harness is checked too: cdclake's append mode and the Iceberg Kafka Connect sink (on a standalone
Connect worker) each end with one row per change event (the script waits for the sink's and fails otherwise), and
the tutorial Structured Streaming pipeline's rows are the backlog's last writes (one micro-batch, deduplicated by
source position), with the logical types it does not decode reported. The goals table (``--goals``) lists every
goal with the quick run's figures, judging none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_real_shape.py"


def test_the_quick_real_shape_benchmark_runs_and_each_lake_equals_its_backlog(stack: Stack) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--peers", "--goals"], capture_output=True, text=True, timeout=1200
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    rows = [line for line in lines if line.startswith(("| postgres", "| mariadb")) and " GiB |" in line]
    assert len(rows) == 2, proc.stdout
    assert all(row.rstrip().endswith("rows) |") and "| True (" in row for row in rows), rows
    assert "plain Spark:" in proc.stdout
    peers = [line for line in lines if line.startswith("| postgres | on | ") and "x |" in line]
    assert len(peers) == 1, proc.stdout
    assert "| rows: yes; types: no, " in peers[0] and "c_numeric string for decimal" in peers[0], peers[0]
    # the goals table: every goal, the quick run's figures printed but not judged (2,000 events, not 1M), and the
    # goals of the benchmarks a quick run leaves out marked as not run
    goals = lines[lines.index("| figure | goal | this run | verdict |") + 2 :][:7]
    assert len(goals) == 7 and all(line.startswith("| ") for line in goals), proc.stdout
    assert (
        goals[0].startswith("| real-shape end to end (postgres, schemas on,") and " events/s | not judged: " in goals[0]
    )
    assert "x (" in goals[1] and "x (" in goals[2] and "our lake equal: yes" in goals[2], goals
    assert all(line.endswith("| not run | not run |") for line in goals[3:6]), goals
    assert goals[6].startswith("| peak RSS at 2,000 events") and " GiB | not judged: " in goals[6], goals[6]
