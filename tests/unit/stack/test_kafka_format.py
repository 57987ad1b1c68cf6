"""KRaft storage formatting with the real Kafka ``StorageTool`` (the jars ``make install`` resolves).

A cluster id is 22 characters of URL-safe base64, and one in 64 random ids starts with ``-``: the local stack
once failed to start on such an id (``kafka-storage: error: argument --cluster-id/-t: expected one argument``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from cdclake.stack.config import StackConfig
from cdclake.stack.debian import binaries
from cdclake.stack.kafka import KafkaService, new_cluster_id


def test_new_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to "-" as the first base64 character; the second uuid does not
    ids = iter([uuid.UUID(bytes=bytes([0xF8]) + bytes(15)), uuid.UUID(bytes=bytes([0x10]) + bytes(15))])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(ids))
    cluster_id = new_cluster_id()
    assert cluster_id == "EAAAAAAAAAAAAAAAAAAAAA" and len(cluster_id) == 22


def test_storage_is_formatted_even_with_a_cluster_id_that_starts_with_a_dash(tmp_path: Path) -> None:
    config = StackConfig.from_env(state_dir=tmp_path)
    if not any((config.jvm_dir / "kafka").glob("kafka_*.jar")):
        pytest.fail(f"Kafka jars missing in {config.jvm_dir / 'kafka'}: run `make install`")
    kafka = KafkaService(config, binaries(), {})
    kafka.home.mkdir(parents=True)
    (kafka.home / "cluster.id").write_text("-" + "A" * 21)  # written by an older version of the stack
    kafka.prepare()
    meta = (kafka.home / "data" / "meta.properties").read_text()
    assert "cluster.id=-AAAAAAAAAAAAAAAAAAAAA" in meta
