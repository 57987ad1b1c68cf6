"""cdc_audit.reconciliation: the rows of a report, and the latest verdict per table read back (embedded lake)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyiceberg.catalog import load_catalog

from cdclake.lake import LakeConfig
from cdclake.reconcile.audit import SAMPLE_KEYS, latest_results, record_report, report_rows, sample_keys
from cdclake.reconcile.source import LakeFrontier, ReconcileReport, TableReconciliation

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _report(orders_status: str, different: tuple[tuple[str, ...], ...] = ()) -> ReconcileReport:
    customers = TableReconciliation(
        "inventory.customers", "lake.pg.inventory.customers", "equal", source_rows=5, lake_rows=5,
        frontier=LakeFrontier(batch_id="b1"),
    )  # fmt: skip
    orders = TableReconciliation(
        "inventory.orders", "lake.pg.inventory.orders", orders_status, source_rows=7, lake_rows=6,  # type: ignore[arg-type]
        missing_keys=(("7",),), different_keys=different, missing_columns=("notes",),
    )  # fmt: skip
    return ReconcileReport("postgres", "postgresql://127.0.0.1:5433/demo", "lake", (customers, orders))


def test_sample_keys_keep_a_few_keys_of_each_kind() -> None:
    many = tuple((str(i),) for i in range(SAMPLE_KEYS + 5))
    table = _report("different", many).tables[1]
    assert sample_keys(table) == {"missing": [["7"]], "different": [list(k) for k in many[:SAMPLE_KEYS]]}
    assert sample_keys(_report("equal").tables[0]) == {}


def test_report_rows_carry_counts_samples_and_the_lake_frontier() -> None:
    rows = report_rows(_report("different", (("3",),)), "airflow cdc_reconcile/r1", T0)
    assert [(r["source_table"], r["status"]) for r in rows] == [
        ("inventory.customers", "equal"),
        ("inventory.orders", "different"),
    ]
    customers, orders = rows
    assert (customers["lake_batch_id"], customers["sample_keys"], customers["missing_columns"]) == ("b1", None, None)
    assert (orders["source_rows"], orders["lake_rows"], orders["missing"], orders["different"]) == (7, 6, 1, 1)
    assert json.loads(orders["sample_keys"]) == {"missing": [["7"]], "different": [["3"]]}
    assert orders["missing_columns"] == "notes" and orders["run"] == "airflow cdc_reconcile/r1"


def test_the_latest_verdict_of_each_table_is_read_back(tmp_path: Path) -> None:
    lake = LakeConfig.embedded(tmp_path / "lake")
    lake.ensure_dirs()
    catalog = load_catalog(**lake.pyiceberg_properties())
    assert latest_results(catalog) == []
    assert record_report(catalog, _report("different", (("3",),)), "run-1", T0) == 2
    assert record_report(catalog, _report("equal"), "run-2", T0 + timedelta(minutes=5)) == 2
    latest = latest_results(catalog, ["postgres"])
    assert [(r["source_table"], r["status"], r["run"]) for r in latest] == [
        ("inventory.customers", "equal", "run-2"),
        ("inventory.orders", "equal", "run-2"),
    ]
    assert latest_results(catalog, ["mariadb"]) == []
