"""Kafka topics of the demo and the tests: end offsets, waiting for records, deleting a connector's topics."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence

from cdclake.connectors import ConnectorSpec


def topic_end_offsets(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Sum of the partitions' end offsets of each topic (0 for a topic that does not exist yet).

    Read by :meth:`cdclake.ingest.sources.KafkaRecordSource.watermarks`, the offsets a batch plans from.

    Raises:
        RecordSourceError: when Kafka cannot be reached.
    """
    from cdclake.ingest.sources import KafkaRecordSource

    _, latest = KafkaRecordSource(bootstrap, [re.escape(t) for t in topics]).watermarks(timeout_s=10.0)
    out = dict.fromkeys(topics, 0)
    for (topic, _partition), end in latest.items():
        out[topic] += end
    return out


def wait_for_records(bootstrap: str, at_least: Mapping[str, int], timeout_s: float = 120.0) -> dict[str, int]:
    """Wait until each topic's end offsets add up to at least the given count.

    Raises:
        TimeoutError: naming the topics that did not get there.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        ends = topic_end_offsets(bootstrap, list(at_least))
        short = {t: (ends[t], n) for t, n in at_least.items() if ends[t] < n}
        if not short:
            return ends
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics did not receive the expected records in {timeout_s:.0f}s: {short} (have, want)")
        time.sleep(1.0)


def delete_connector_topics(bootstrap: str, prefix: str) -> list[str]:
    """Delete a connector's topics: ``<prefix>``, ``<prefix>.*``, ``<prefix>-signal``, its heartbeat topic.

    Returns:
        The topics deleted (waits for each deletion).
    """
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    extra = (f"{prefix}-signal", f"__debezium-heartbeat.{prefix}")
    topics = [
        t for t in admin.list_topics(timeout=10).topics if t == prefix or t.startswith(prefix + ".") or t in extra
    ]
    if topics:
        for future in admin.delete_topics(topics).values():
            future.result(timeout=30)
    return topics


def data_topics(spec: ConnectorSpec, tables: Sequence[str]) -> dict[str, str]:
    """Spec table name (``inventory.customers``) → its Debezium data topic, for the spec tables ending in ``tables``."""
    return {t.name: f"{spec.topic_prefix}.{t.name}" for t in spec.tables if t.name.rpartition(".")[2] in tables}
