"""A MariaDB TRUNCATE, as the real Debezium connector reports it in its transaction metadata.

Real behaviour pinned here: MariaDB (like MySQL) runs TRUNCATE as a statement of its own, committed at once.
Debezium 3.5 emits a BEGIN for its GTID and the truncate event (op ``t``, carrying the transaction's id) but no
END for it; the next transaction's BEGIN follows. The transaction-consistent batch must not hold it (and with
it every later transaction of the source) until it expires.

``mariadb_truncate_tx.jsonl`` is three real transactions recorded from the local stack's ``maria`` connector
during a ``cdclake demo`` run: the TRUNCATE of ``demo.order_items`` (GTID ``0-184054-262``), 22 order items
inserted in one transaction (``…-263``) and a customer update (``…-264``), with their transaction records.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdclake.ingest.runner import replay_files

pytestmark = pytest.mark.spark

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "captures" / "mariadb_truncate_tx.jsonl"
TRUNCATE_TX = "0-184054-262"


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in CAPTURE.read_text().splitlines()]


def test_the_capture_is_what_the_test_needs() -> None:
    records = _records()
    tx = [json.loads(str(r["value"]))["payload"] for r in records if r["topic"] == "maria.transaction"]
    assert [(p["status"], p["id"]) for p in tx] == [
        ("BEGIN", "0-184054-262"),
        ("BEGIN", "0-184054-263"),
        ("END", "0-184054-263"),
        ("BEGIN", "0-184054-264"),
        ("END", "0-184054-264"),
    ]
    truncates = [
        json.loads(str(r["value"]))["payload"] for r in records if r["value"] and '"op":"t"' in str(r["value"])
    ]
    assert len(truncates) == 1 and truncates[0]["transaction"]["id"] == TRUNCATE_TX


def test_a_truncate_without_end_is_applied_at_once_and_holds_nothing(spark: SparkSession, tmp_path: Path) -> None:
    prefix = f"tr{uuid.uuid4().hex[:8]}"
    replayed = tmp_path / "capture.jsonl"
    with replayed.open("w") as fh:
        for record in _records():  # the topics and the connector's name, so that nothing collides in the lake
            record["topic"] = prefix + str(record["topic"])[len("maria") :]
            if record["value"]:
                record["value"] = str(record["value"]).replace('"name":"maria"', f'"name":"{prefix}"')
            fh.write(json.dumps(record) + "\n")
    summary = replay_files(spark, [replayed], topic_prefix=prefix)  # on the records' clock: nothing expires
    assert summary.transactions["counts"]["complete"] == 3
    assert summary.transactions["counts"]["held"] == summary.transactions["counts"]["expired"] == 0
    assert not summary.held_everything and summary.transactions["cuts"] == {}
    assert summary.as_dict()["checks"] == {"ok": True, "problems": []}
    items = spark.sql(f"SELECT count(*) AS n FROM lake.{prefix}.demo.order_items").collect()[0]["n"]
    assert items == 22
