"""The goals table of ``benchmarks/bench_real_shape.py --goals`` (``benchmarks/goals.py``): each goal is judged
from one run's figures, a missed goal says by how much, and a figure not measured, or measured on a smaller
backlog than its goal's, is not judged."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from goals import at_least, at_most, goal_rows, render_goals  # noqa: E402


def _figures(**overrides: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "events": 1_000_000,
        "cells": [
            {"kind": "mariadb", "schemas": True, "events_per_s": 30_000.0, "peak_rss_gib": 2.10, "lake_equal": True},
            {"kind": "postgres", "schemas": True, "events_per_s": 20_000.0, "peak_rss_gib": 1.90, "lake_equal": True},
        ],
        "peers": {
            "upsert": 20_000.0,
            "append": 21_000.0,
            "sink": 14_000.0,
            "tutorial": 25_000.0,
            "tutorial_lake": "rows: yes; types: no, 5 of 10",
        },
        "latency": {"p50_s": 3.1, "p90_s": 4.4, "p99_s": 16.0, "rate": 1000, "rows": 84_000},
        "small_batch": {"median_s": 2.45, "warm_batches": 13, "records": 55},
        "merge_growth": {"small_rows": 100_000, "large_rows": 10_000_000, "small_s": 4.0, "large_s": 3.0},
    }
    figures.update(overrides)
    return figures


def test_each_goal_is_judged_on_the_headline_cell_and_a_miss_says_by_how_much() -> None:
    rows = goal_rows(_figures())
    measured = [row[2] for row in rows]
    verdicts = [row[3] for row in rows]

    assert [row[0].split(" (")[0].split(",")[0] for row in rows[:3]] == [
        "real-shape end to end",
        "vs the Iceberg Kafka Connect sink",
        "vs the tutorial Spark pipeline",
    ]
    assert rows[0][0].startswith("real-shape end to end (postgres, schemas on,")  # not the first cell
    assert (measured[0], verdicts[0]) == ("20,000 events/s", "missed by 20,000 events/s (50% of the goal)")
    assert (measured[1], verdicts[1]) == ("1.50x (21,000 / 14,000 events/s)", "met")
    assert measured[2].startswith("0.80x (20,000 / 25,000 events/s); our lake equal: yes; the tutorial's: rows: yes")
    assert verdicts[2] == "missed by 2.20x (27% of the goal)"
    assert (measured[3], verdicts[3]) == ("p50 3.10 s, p90 4.40 s, p99 16.00 s (84,000 rows)", "p99 missed by 1.00 s")
    assert (measured[4], verdicts[4]) == ("median 2.45 s (13 warm batches of 55 records)", "missed by 0.45 s")
    assert (measured[5], verdicts[5]) == ("0.75x (4.0 s / 3.0 s)", "met")
    # the most RSS of any cell, not only the headline cell's
    assert (measured[6], verdicts[6]) == ("2.10 GiB", "missed by 0.10 GiB")


def test_a_lake_that_differs_from_the_source_misses_the_tutorial_goal_whatever_the_ratio() -> None:
    cells = [{"kind": "postgres", "schemas": True, "events_per_s": 90_000.0, "peak_rss_gib": 1.0, "lake_equal": False}]
    peers = {"upsert": 90_000.0, "append": 1.0, "sink": 1.0, "tutorial": 1_000.0, "tutorial_lake": "rows: yes"}

    verdicts = [verdict for figure, _, _, verdict in goal_rows(_figures(cells=cells, peers=peers))]

    assert verdicts[0] == "met"
    assert verdicts[2] == "missed: our lake differs"


def test_a_quick_run_judges_nothing_and_says_what_it_did_not_run() -> None:
    figures = _figures(events=2_000, latency=None, small_batch=None, merge_growth=None)

    rows = goal_rows(figures)
    table = render_goals(figures)

    assert len(rows) == 7 and table.count("\n") == 8
    not_judged = "not judged: 2,000 events (the goal is stated for 1,000,000)"
    assert [verdict for *_, verdict in rows] == [not_judged] * 3 + ["not run"] * 3 + [not_judged]
    assert rows[0][2] == "20,000 events/s"  # still printed


def test_a_run_without_peers_says_so() -> None:
    rows = goal_rows(_figures(peers=None))

    assert rows[1][2:] == ("not run", "not run") and rows[2][2:] == ("not run", "not run")


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (at_least(40_000, 40_000), "met"),
        (at_least(1.19, 1.5, "x"), "missed by 0.31x (79% of the goal)"),
        (at_most(2.0, 2.0, " s"), "met"),
        (at_most(1.2, 1.2, "x", strict=True), "missed: at the limit, not below it"),
        (at_most(1.19, 1.2, "x", strict=True), "met"),
    ],
)
def test_verdicts_at_and_around_the_goal(verdict: str, expected: str) -> None:
    assert verdict == expected
