"""The batch summary's dead letters per topic and reason: counted from the audit phase's one aggregation
(``topic, partition, reason, count`` rows), reconciled with ``dead_lettered`` and read back (no Spark), and
one batch through the real audit phase (Spark)."""

from __future__ import annotations

import pytest

from cdclake.ingest.summary import (
    NO_REASON,
    BatchSummary,
    DeadLetterCounts,
    dead_letter_counts,
    describe_dead_letters,
    load_summary,
)

from .conftest import RunBatch
from .events import PgTable

ITEMS = "pg.inventory.items"
ORDERS = "pg.inventory.orders"
TX = "pg.transaction"


def test_dead_letters_are_counted_per_partition_and_per_topic_and_reason() -> None:
    rows = [
        (ORDERS, 1, "no_schema", 4),
        (ITEMS, 0, "invalid_json", 2),
        (ITEMS, 1, "invalid_json", 1),
        (ITEMS, 1, "type_mismatch", 3),
        (ORDERS, 0, "no_schema", 5),
        (TX, 0, None, 1),  # no reason: counted, under NO_REASON
        (ITEMS, 0, "missing_op", 0),  # an empty group adds nothing
    ]
    counts = dead_letter_counts(rows)
    assert counts == DeadLetterCounts(
        by_partition={f"{ITEMS}/0": 2, f"{ITEMS}/1": 4, f"{ORDERS}/0": 5, f"{ORDERS}/1": 4, f"{TX}/0": 1},
        by_reason={
            ITEMS: {"invalid_json": 3, "type_mismatch": 3},
            ORDERS: {"no_schema": 9},
            TX: {NO_REASON: 1},
        },
    )
    # both breakdowns reconcile with the rows and with each other
    assert counts.total == sum(n for *_, n in rows) == 16
    assert sum(n for reasons in counts.by_reason.values() for n in reasons.values()) == counts.total


def test_partitions_are_ordered_by_number() -> None:
    counts = dead_letter_counts([(ITEMS, 10, "invalid_json", 1), (ITEMS, 2, "invalid_json", 1)])
    assert list(counts.by_partition) == [f"{ITEMS}/2", f"{ITEMS}/10"]


def test_the_summary_lists_dead_letters_per_topic_and_reason_and_reads_them_back() -> None:
    dead = dead_letter_counts([(ORDERS, 0, "no_schema", 5), (ITEMS, 0, "invalid_json", 1)])
    summary = BatchSummary(source="pg", batch_id="b-1", status="committed", dead_letters=dead).as_dict()
    assert (summary["dead_lettered"], summary["dead_lettered_by_partition"], summary["dead_letters"]) == (
        6,
        {f"{ITEMS}/0": 1, f"{ORDERS}/0": 5},
        {ITEMS: {"invalid_json": 1}, ORDERS: {"no_schema": 5}},
    )
    # dead letters are no consistency problem: the batch's checks pass
    assert summary["checks"] == {"ok": True, "problems": []}
    parsed = load_summary(summary)
    assert (parsed.dead_lettered, parsed.dead_letters) == (6, {ITEMS: {"invalid_json": 1}, ORDERS: {"no_schema": 5}})
    assert parsed.dead_letter_report() == [
        f"{ITEMS}: 1 record(s), reason invalid_json",
        f"{ORDERS}: 5 record(s), reason no_schema",
    ]


def test_a_batch_without_dead_letters_has_an_empty_breakdown() -> None:
    summary = BatchSummary(source="pg", batch_id=None, status="no-new-records").as_dict()
    assert (summary["dead_lettered"], summary["dead_lettered_by_partition"], summary["dead_letters"]) == (0, {}, {})
    assert load_summary(summary).dead_letter_report() == []
    assert describe_dead_letters({}) == []


def test_a_summary_written_without_the_breakdown_still_reports_its_total() -> None:
    old = {"source": "pg", "batch_id": "b-0", "dead_lettered": 3, "checks": {"ok": True}}
    assert load_summary(old).dead_letter_report() == ["3 record(s), reasons not in the summary"]


@pytest.mark.spark
def test_a_batch_counts_its_dead_letters_per_topic_and_reason(prefix: str, table: PgTable, ingest: RunBatch) -> None:
    """Undecodable records of a table that gets rows and of one that never exists (every record dead)."""
    orders = PgTable(prefix=prefix, table="orders")
    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table._emit('{"id": 2}', "not json")
    orders._emit('{"id": 1}', "{broken")
    orders._emit('{"id": 2}', "[]")  # JSON, but no Debezium record
    summary = ingest(table.take() + orders.take()).as_dict()
    assert summary["dead_letters"] == {
        table.topic: {"invalid_json": 1},
        orders.topic: {"invalid_json": 1, "unrecognised_record": 1},
    }
    assert summary["dead_lettered"] == 3 == sum(n for r in summary["dead_letters"].values() for n in r.values())
    assert summary["dead_lettered_by_partition"] == {f"{orders.topic}/0": 2, f"{table.topic}/0": 1}
    assert summary["tables"][f"lake.{prefix}.inventory.items"]["dead_lettered"] == 1
    assert summary["checks"]["ok"]
