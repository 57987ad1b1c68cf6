"""Frozen models read the Debezium wire objects by their wire names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from cdclake.debezium import (
    Operation,
    SchemaChangeEvent,
    SourceBlock,
    TransactionEvent,
    TransactionStatus,
    normalise_snapshot,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, "true"), (False, None), (None, None), ("false", None), ("LAST", "last"), ("incremental", "incremental"),
     ("first_in_data_collection", "first_in_data_collection")],
)  # fmt: skip
def test_normalise_snapshot(raw: object, expected: str | None) -> None:
    assert normalise_snapshot(raw) == expected


def test_operation_codes() -> None:
    assert [op.value for op in Operation] == ["r", "c", "u", "d", "t", "m"]


def test_source_block_from_seed(seed_examples_dir: Path) -> None:
    (path,) = seed_examples_dir.glob("informix-16-*.json")
    source = SourceBlock.model_validate(json.loads(path.read_text())["payload"]["source"])
    assert (source.connector, source.schema_, source.table_name, source.commit_lsn) == (
        "informix", "myschema", "customers", "627404540760620"
    )  # fmt: skip
    assert source.snapshot is None
    with pytest.raises(ValidationError):
        source.connector = "x"  # type: ignore[misc]


def test_transaction_event_from_seed(seed_examples_dir: Path) -> None:
    (path,) = seed_examples_dir.glob("postgresql-05-*.json")
    event = TransactionEvent.model_validate(json.loads(path.read_text()))
    assert event.status is TransactionStatus.END
    assert [(c.data_collection, c.event_count) for c in event.data_collections or ()] == [("s1.a", 1), ("s2.a", 1)]


def test_schema_change_event_from_seed(seed_examples_dir: Path) -> None:
    (path,) = seed_examples_dir.glob("mysql-connector-03-*.json")
    event = SchemaChangeEvent.model_validate(json.loads(path.read_text())["payload"])
    assert event.database_name == "inventory"
    assert event.ddl.startswith("ALTER TABLE customers")  # type: ignore[union-attr]
    assert event.table_changes[0]["type"] == "ALTER"
    assert event.source is not None and event.source.snapshot is None
