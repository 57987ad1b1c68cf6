"""DemoReport: the verdict and the freshness figures ``cdclake demo`` prints."""

from __future__ import annotations

from datetime import UTC, datetime

from cdclake.demo.pipeline import DemoReport, TableVerdict


def _report(**fields: object) -> DemoReport:
    return DemoReport(datetime(2026, 1, 1, tzinfo=UTC), "http://127.0.0.1:8080", "secrets.env", "/lake", **fields)  # type: ignore[arg-type]


def test_freshness_median_and_max_by_nearest_rank() -> None:
    report = _report(freshness_s=[3.0, 1.0, 2.0, 9.0])
    assert (report.freshness_p50, report.freshness_max) == (2.0, 9.0)
    assert (_report().freshness_p50, _report().freshness_max) == (None, None)


def test_equal_needs_a_verdict_and_no_difference() -> None:
    equal = TableVerdict("postgres", "inventory.orders", 3, 3, "equal")
    different = TableVerdict("mariadb", "demo.orders", 3, 2, "different", sample_keys="(7,)")
    assert not _report().equal and _report(verdicts=[equal]).equal
    report = _report(verdicts=[equal, different])
    assert not report.equal and report.different == [different]
