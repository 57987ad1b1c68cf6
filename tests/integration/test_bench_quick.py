"""The real-shape ingestion benchmark's quick mode (``benchmarks/bench_real_shape.py --quick``) on the local stack:
it runs end to end (backlogs generated from the captures and produced, one ``cdclake ingest`` process per
backlog, the plain-Spark limit) and each lake holds exactly its backlog's live keys. No figure is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_real_shape.py"


def test_the_quick_real_shape_benchmark_runs_and_each_lake_equals_its_backlog(stack: Stack) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=900)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| postgres", "| mariadb"))]
    assert len(rows) == 2, proc.stdout
    assert all(row.rstrip().endswith("rows) |") and "| True (" in row for row in rows), rows
    assert "plain Spark:" in proc.stdout
