"""A capped drain of an old backlog on the real local stack: every transaction reaches the lake whole.

A test-owned PostgreSQL capture (real Debezium, transaction metadata on) gets a backlog: 300 one-row transactions,
then two transactions of 400 customers and 100 orders each and one of 800 and 200. Once the backlog is older than
the transaction age limit (``CDC_TX_MAX_INCOMPLETE_AGE_S``, 2 s here), it is drained in-process by batches of at
most 600 records (``ingest_from_kafka``: the job's code, Kafka's offsets looked up by timestamp for the cut; the
last transaction is larger than the cap, which is doubled for it). After every batch each transaction is in the
lake whole or not at all, in both tables, none is applied ``expired`` or ``mismatched``, the batch's checks are ok;
the lake ends equal to the source.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from owned_sources import OwnedSource, assert_lake_equals_source, running_capture
from pyspark.sql import SparkSession

from cdclake.demo.database import app_sql
from cdclake.demo.topics import wait_for_records
from cdclake.ingest.runner import ingest_from_kafka
from cdclake.lake import LakeConfig
from cdclake.lake.names import spec_table_parts
from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

RUN = secrets.token_hex(3)
SMALL = 300
#: customers and orders of each large transaction (one an order for every 4 customers)
LARGE = ((400, 100), (400, 100), (800, 200))
CAP = 600
AGE_S = 2


@pytest.fixture(scope="module")
def capture(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnedSource]:
    with running_capture(stack, tmp_path_factory.mktemp("capped-specs"), "postgres", f"capped_{RUN}") as src:
        yield src


def _write_backlog(stack: Stack, src: OwnedSource) -> dict[int, tuple[int, int]]:
    """The transactions, numbered from 1: each row's ``name`` (customers) or ``customer_id`` (orders) is its
    transaction's number; returns the customers and orders each wrote."""
    sizes: dict[int, tuple[int, int]] = {}
    with app_sql(stack, "postgres") as sql:
        for n in range(1, SMALL + 1):
            sql.execute(
                f"INSERT INTO {src.customers} (id, name, email, region) VALUES (%s, %s, NULL, 'EU')", [n + 10, f"t{n}"]
            )
            sizes[n] = (1, 0)
        for n, (customers, orders) in enumerate(LARGE, start=SMALL + 1):
            with sql.transaction():
                base = n * 1000
                for i in range(customers):
                    sql.execute(
                        f"INSERT INTO {src.customers} (id, name, email, region) VALUES (%s, %s, NULL, 'US')",
                        [base + i, f"t{n}"],
                    )
                    if i % 4 == 0:
                        sql.execute(
                            f"INSERT INTO {src.orders} (id, customer_id, amount, status, ordered_on) "
                            "VALUES (%s, %s, 1.50, 'new', '2026-01-01')",
                            [base + i, n],
                        )
            sizes[n] = (customers, orders)
    return sizes


def _in_lake(spark: SparkSession, src: OwnedSource) -> dict[int, tuple[int, int]]:
    def table(name: str) -> str:
        return ".".join(["lake", *spec_table_parts(src.spec, name)])

    customers = Counter(
        {
            int(r["name"][1:]): r["n"]
            for r in spark.sql(
                f"SELECT name, count(*) AS n FROM {table(src.customers)} WHERE name LIKE 't%' GROUP BY name"
            ).collect()
        }
    )
    orders: Counter[int] = Counter()
    if spark.catalog.tableExists(table(src.orders)):
        orders.update(
            {
                r["customer_id"]: r["n"]
                for r in spark.sql(
                    f"SELECT customer_id, count(*) AS n FROM {table(src.orders)} WHERE customer_id > {SMALL} "
                    "GROUP BY customer_id"
                ).collect()
            }
        )
    return {n: (customers[n], orders[n]) for n in set(customers) | set(orders)}


def test_a_capped_drain_of_an_old_backlog_applies_every_transaction_whole(
    capture: OwnedSource, stack: Stack, spark: SparkSession, spark_lake_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = _write_backlog(stack, capture)
    topics = capture.data_topics
    wait_for_records(
        stack.config.kafka_bootstrap,
        {
            topics[capture.customers]: 1 + SMALL + sum(c for c, _ in LARGE),
            topics[capture.orders]: 1 + sum(o for _, o in LARGE),
        },
    )
    time.sleep(AGE_S + 1)  # every record of the backlog is older than the age limit on the wall clock
    monkeypatch.setenv("CDC_TX_MAX_INCOMPLETE_AGE_S", str(AGE_S))
    batches = []
    while True:
        summary = ingest_from_kafka(spark, str(capture.spec_path), max_records=CAP)
        if summary.batch_id is None:
            break
        batches.append(summary)
        assert len(batches) <= 30, "the drain does not end"
        done = summary.as_dict()
        counts = summary.transactions["counts"]
        assert counts.get("expired", 0) == counts.get("mismatched", 0) == 0, (len(batches), counts)
        assert done["checks"]["ok"], done["checks"]
        print(f"batch {len(batches)}: {summary.records} records {summary.ranges}, transactions {counts}")
        torn = {n: (got, sizes[n]) for n, got in _in_lake(spark, capture).items() if got != sizes[n]}
        assert not torn, f"batch {len(batches)} applied part of transactions (lake, source): {torn}"
    # capped batches, each measuring ages up to its cut, then the last one (read to the log's end)
    assert len(batches) >= 4, [b.records for b in batches]
    assert _in_lake(spark, capture) == sizes
    assert_lake_equals_source(capture, LakeConfig.embedded(spark_lake_dir))
