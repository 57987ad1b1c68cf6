"""Schema consistency checks: DDL from the schema change topic against the columns the data events carry."""

from __future__ import annotations

from cdclake.ingest.schema_checks import TableDdl, _table_name, audit_rows, unexplained


def _ddl(table: str, cols: list[str], change: str = "ALTER", position: list[int] | None = None) -> TableDdl:
    return TableDdl(table, change, f"ALTER TABLE {table} ...", tuple((c, "INT") for c in cols), position or [5, 1], 3)


def test_table_ids_lose_their_quotes() -> None:
    assert _table_name('"demo"."all_types"') == "demo.all_types"
    assert _table_name("`demo`.`t`") == "demo.t"


def test_matching_columns_explain_the_drift() -> None:
    ddls = [_ddl("demo.t", ["id", "a"]), _ddl("demo.t", ["id", "a", "b"], position=[6, 2])]
    assert unexplained(ddls, {"demo.t": ["id", "a", "b"]}) == []


def test_unexplained_mismatch_names_table_column_and_position() -> None:
    ddls = [_ddl("demo.t", ["id", "a", "b"], position=[7, 40])]
    assert unexplained(ddls, {"demo.t": ["id", "a", "c"]}) == [
        "demo.t: column b declared by DDL at position [7, 40] is missing from its events",
        "demo.t: events carry column c unknown to the DDL at position [7, 40]",
    ]


def test_dropped_tables_and_tables_without_events_are_not_mismatches() -> None:
    ddls = [_ddl("demo.gone", ["id"], change="DROP"), _ddl("demo.quiet", ["id", "x"])]
    assert unexplained(ddls, {"demo.gone": ["id", "y"]}) == []


def test_audit_rows_record_source_ddl_and_lake_evolution() -> None:
    rows = audit_rows(
        "maria",
        "b1",
        [_ddl("demo.t", ["id", "a"])],
        {"lake.maria.demo.t": {"schema_changes": ["add_column a: - -> INT"], "watermark": [9], "quarantined": None}},
    )
    assert [(r["table"], r["kind"], r["detail"]) for r in rows] == [
        ("demo.t", "source_alter", '["id INT", "a INT"]'),
        ("lake.maria.demo.t", "lake_evolution", "add_column a: - -> INT"),
    ]


def test_inconclusive_comparisons_are_not_reported() -> None:
    ddls = [_ddl("demo.t", ["id", "a", "b"], position=[7, 40, 0])]
    events = {"demo.t": ["id", "a"]}
    # events from before the DDL are in the batch (first event at pos 30 < DDL at 40): inconclusive
    assert unexplained(ddls, events, first_positions={"demo.t": [7, 30, 0, 1, 0, 5]}) == []
    # the schema topic was not read to its end (capped batch): inconclusive
    assert unexplained(ddls, events, first_positions={"demo.t": [7, 50, 0, 1, 0, 9]}, schema_topic_complete=False) == []
    # every event after the DDL, schema topic complete: a real mismatch
    assert unexplained(ddls, events, first_positions={"demo.t": [7, 50, 0, 1, 0, 9]}) == [
        "demo.t: column b declared by DDL at position [7, 40, 0] is missing from its events"
    ]
