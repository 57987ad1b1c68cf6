"""Debezium wire vocabulary: field names, envelope models and operations."""

from __future__ import annotations

from cdclake.debezium.models import (
    DataCollectionEventCount,
    Operation,
    SchemaChangeEvent,
    SourceBlock,
    TransactionBlock,
    TransactionEvent,
    TransactionStatus,
    normalise_snapshot,
)

__all__ = [
    "DataCollectionEventCount",
    "Operation",
    "SchemaChangeEvent",
    "SourceBlock",
    "TransactionBlock",
    "TransactionEvent",
    "TransactionStatus",
    "normalise_snapshot",
]
