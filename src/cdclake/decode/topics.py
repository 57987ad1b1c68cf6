"""What discovery finds of a batch's topics: per topic, its schema versions with counts and sample records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SchemaGroup:
    """The records of one schema version of a topic in one partition.

    Attributes:
        topic: the topic.
        schema_hash: fingerprint of the embedded Connect schema (None with schemas off).
        records: how many records (of the sample, when discovered from one).
        tombstones: how many of them have a null value.
        last_offset: the greatest offset.
        samples: parsed sample values, latest first.
        key_sample: a parsed sample key.
        partition: the partition.
        first_offset: the smallest offset.
        first_ts: the earliest Kafka timestamp.
    """

    topic: str
    schema_hash: int | None
    records: int
    tombstones: int
    last_offset: int
    samples: list[Any]
    key_sample: Any
    partition: int = 0
    first_offset: int = 0
    first_ts: Any = None


@dataclass
class DiscoveredTopic:
    """One topic of the batch: its groups, oldest schema version first."""

    name: str
    groups: list[SchemaGroup] = field(default_factory=list)
    #: sampled schema texts with their delimiter (see :func:`cdclake.decode.discovery.known_schemas`)
    prefixes: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(g.records for g in self.groups)

    @property
    def tombstones(self) -> int:
        return sum(g.tombstones for g in self.groups)


def loads(text: str | None) -> Any:
    """The JSON value of a record's text, or None when it is empty, not JSON, or nested too deep for Python's
    parser (never raises: a record the decoder dead-letters must not stop discovery)."""
    try:
        return json.loads(text) if text else None
    except (ValueError, RecursionError):
        return None
