# ruff: noqa: E501
"""Every seed example that is a change, transaction or schema change event decodes to the documented values.

Known defects of the documentation examples (see the digests) are pinned here to what real Debezium does.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdclake.decode import ConnectSchemaSource, DecodeOptions, TableId, decode_records, records_from_dicts

pytestmark = pytest.mark.spark

MYSQL_TOPIC = "mysql-server-1.inventory.customers"
MONGO_TOPIC = "fulfillment.inventory.customers"
IFX_TOPIC = "myconnector.myschema.customers"


def _load(seed_dir: Path, prefix: str) -> dict[str, Any]:
    (path,) = seed_dir.glob(prefix + "*.json")
    return json.loads(path.read_text())


def _rec(topic: str, offset: int, value: Any, key: Any = None) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "timestamp": 0,
        "key": None if key is None else json.dumps(key),
        "value": None if value is None else json.dumps(value),
    }


def _rows(frame: Any, *cols: str) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in cols) for r in frame.orderBy("_cdc_offset").collect()]


# (seed prefix, schemas on?) of the MySQL data events; update/delete/truncate have the placeholder "schema": {}
MYSQL_EVENTS = [
    ("mysql-mongodb-02", "c", (1004, "Anne", "Kretchmar", "annek@noanswer.org"), [3, 154, 0]),
    ("mysql-connector-05", "c", (1004, "Anne", "Kretchmar", "annek@noanswer.org"), [3, 154, 0]),
    ("mysql-connector-06", "u", (1004, "Anne Marie", "Kretchmar", "annek@noanswer.org"), [3, 484, 0]),
    ("mysql-connector-07", "d", (1004, "Anne Marie", "Kretchmar", "annek@noanswer.org"), [3, 805, 0]),
]


@pytest.mark.parametrize(("seed", "op", "row", "binlog"), MYSQL_EVENTS, ids=[e[0] for e in MYSQL_EVENTS])
def test_mysql_full_schema_seeds(
    spark: SparkSession, seed_examples_dir: Path, seed: str, op: str, row: tuple[Any, ...], binlog: list[int]
) -> None:
    key = _load(seed_examples_dir, "mysql-connector-04")
    records = records_from_dicts(spark, [_rec(MYSQL_TOPIC, 7, _load(seed_examples_dir, seed), key)])
    batch = decode_records(records, options=DecodeOptions())
    table = TableId(server="mysql-server-1", namespace="inventory", table="customers")
    assert list(batch.tables) == [table]
    assert batch.table_info[table].key_columns == ("id",)
    frame = batch.tables[table]
    got = _rows(frame, "id", "first_name", "last_name", "email", "_cdc_op", "_cdc_position", "_cdc_connector")
    assert got == [(*row, op, [Decimal(x) for x in [*binlog, 1, 0, 7]], "mysql")]
    assert batch.dead_letters.count() == 0


@pytest.mark.parametrize(
    ("seed", "op", "row"),
    [
        ("mysql-mongodb-03", "u", (1004, "Anne Marie", "Kretchmar", "annek@noanswer.org")),
        ("mysql-mongodb-04", "d", (1004, "Anne Marie", "Kretchmar", "annek@noanswer.org")),
        ("mysql-mongodb-05", "t", (None, None, None, None)),
    ],
)
def test_mysql_placeholder_schema_seeds(
    spark: SparkSession, seed_examples_dir: Path, seed: str, op: str, row: tuple[Any, ...]
) -> None:
    """Defect: ``"schema": {}`` is a doc placeholder; real events carry the create event's schema.

    Decoded as schemas-off with the create event's row schema as the schema source. The update and truncate
    examples have ``source.name`` twice (last wins, as in Jackson). The truncate has a null Kafka key.
    """
    create = _load(seed_examples_dir, "mysql-mongodb-02")
    row_schema = next(fld for fld in create["schema"]["fields"] if fld["field"] == "after")
    payload = _load(seed_examples_dir, seed)["payload"]
    key = None if op == "t" else {"id": 1004}
    records = records_from_dicts(spark, [_rec(MYSQL_TOPIC, 3, payload, key)])
    options = DecodeOptions(
        key_schemas_enabled=False,
        value_schemas_enabled=False,
        schema_source=ConnectSchemaSource({"inventory.customers": row_schema}),
    )
    batch = decode_records(records, options=options)
    (frame,) = batch.tables.values()
    got = _rows(frame, "id", "first_name", "last_name", "email", "_cdc_op", "_cdc_snapshot", "_cdc_key")
    assert got == [(*row, op, None, None if key is None else json.dumps(key))]


def test_mongodb_seeds(spark: SparkSession, seed_examples_dir: Path) -> None:
    """Create (schema on), update and delete (placeholder ``"schema": {}`` -> decoded as bare payloads).

    Defects pinned: the key ``"1004"`` differs from ``after._id`` (``$numberLong``): the key is the identity;
    the delete has ``snapshot: true`` (normalised to ``"true"``, op stays ``d``).
    """
    key = _load(seed_examples_dir, "mysql-mongodb-07")
    create = _load(seed_examples_dir, "mysql-mongodb-14")
    update = _load(seed_examples_dir, "mysql-mongodb-15")["payload"]
    delete = _load(seed_examples_dir, "mysql-mongodb-16")["payload"]
    on = decode_records(records_from_dicts(spark, [_rec(MONGO_TOPIC, 1, create, key)]), options=DecodeOptions())
    off = decode_records(
        records_from_dicts(
            spark, [_rec(MONGO_TOPIC, 2, update, key["payload"]), _rec(MONGO_TOPIC, 3, delete, key["payload"])]
        ),
        options=DecodeOptions(key_schemas_enabled=False, value_schemas_enabled=False),
    )
    table = TableId(server="fulfillment", namespace="inventory", table="customers")
    cols = ("id", "document", "_cdc_op", "_cdc_snapshot", "_cdc_position", "_cdc_updated_fields", "_cdc_removed_fields")
    assert _rows(on.tables[table], *cols) == [
        ("1004", create["payload"]["after"], "c", None, [Decimal(x) for x in (1558965508000, 31, 1, 0, 1)], None, None)
    ]
    assert _rows(off.tables[table], *cols) == [
        ("1004", update["after"], "u", None, [Decimal(x) for x in (1558965508000, 1, 1, 0, 2)], '{"first_name": "Anne Marie"}', None),
        ("1004", delete["before"], "d", "true", [Decimal(x) for x in (1558965508000, 6, 1, 0, 3)], None, None),
    ]  # fmt: skip
    assert on.table_info[table].key_columns == ("id",)


@pytest.mark.parametrize(
    "seed", ["mysql-mongodb-08", "mysql-mongodb-09", "mysql-mongodb-10", "mysql-mongodb-11", "mysql-mongodb-12", "mysql-mongodb-13"]
)  # fmt: skip
def test_mongodb_key_payloads_are_opaque(spark: SparkSession, seed_examples_dir: Path, seed: str) -> None:
    key = _load(seed_examples_dir, seed)
    value = _load(seed_examples_dir, "mysql-mongodb-16")["payload"]
    batch = decode_records(
        records_from_dicts(spark, [_rec(MONGO_TOPIC, 0, value, key)]),
        options=DecodeOptions(key_schemas_enabled=False, value_schemas_enabled=False),
    )
    (frame,) = batch.tables.values()
    assert [r["id"] for r in frame.collect()] == [key["id"]]


def test_informix_seeds(spark: SparkSession, seed_examples_dir: Path) -> None:
    """Create (schema on), update and delete (placeholder schemas).

    Defect pinned: the update's ``after`` spells the key column ``ID``; Debezium uses the column name ``id``
    (as in ``before`` and the schema), so the fixture is corrected before decoding.
    """
    create = _load(seed_examples_dir, "informix-16")
    row_schema = next(fld for fld in create["schema"]["fields"] if fld["field"] == "after")
    update = _load(seed_examples_dir, "informix-17")["payload"]
    update["after"]["id"] = update["after"].pop("ID")
    delete = _load(seed_examples_dir, "informix-18")["payload"]
    on = decode_records(
        records_from_dicts(spark, [_rec(IFX_TOPIC, 0, create, _load(seed_examples_dir, "informix-15"))]),
        options=DecodeOptions(),
    )
    off = decode_records(
        records_from_dicts(spark, [_rec(IFX_TOPIC, 1, update, {"id": 1005}), _rec(IFX_TOPIC, 2, delete, {"id": 1005})]),
        options=DecodeOptions(
            key_schemas_enabled=False,
            value_schemas_enabled=False,
            schema_source=ConnectSchemaSource({IFX_TOPIC: row_schema}, keys={IFX_TOPIC: ["id"]}),
        ),
    )
    table = TableId(server="myconnector", namespace="myschema", table="customers")
    lsn = [Decimal(627404540760620), Decimal(627404540485812), Decimal(1), Decimal(0)]
    cols = ("id", "email", "_cdc_op", "_cdc_position", "_cdc_source_ts", "_cdc_db", "_cdc_schema")
    assert _rows(on.tables[table], *cols) == [
        (1005, "john.doe@example.org", "c", [*lsn, Decimal(0)], datetime(2019, 6, 5, 10, 11, 8, 470000), "mydatabase", "myschema")
    ]  # fmt: skip
    assert _rows(off.tables[table], *cols) == [
        (1005, "noreply@example.org", "u", [*lsn, Decimal(1)], datetime(2019, 6, 5, 10, 19, 55, 937000), "mydatabase", "myschema"),
        (1005, "noreply@example.org", "d", [*lsn, Decimal(2)], datetime(2019, 6, 5, 10, 27, 25, 243000), "mydatabase", "myschema"),
    ]  # fmt: skip
    assert on.table_info[table].key_columns == ("ID",)  # the key seed names the column ``ID``
    assert off.table_info[table].key_columns == ("id",)


@pytest.mark.parametrize(
    ("seed", "status", "tx_id", "count", "collections"),
    [
        ("postgresql-04", "BEGIN", "571", None, None),
        ("postgresql-05", "END", "571", 2, [("s1.a", 1), ("s2.a", 1)]),
        ("mysql-connector-08", "BEGIN", "0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10", None, None),
        ("mysql-connector-09", "END", "0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10", 2, [("s1.a", 1), ("s2.a", 1)]),
        ("informix-12", "BEGIN", "571:53195829", None, None),
        ("informix-13", "END", "571:53195832", 2, [("testdb.informix.tablea", 1), ("testdb.informix.tableb", 1)]),
    ],
)
def test_transaction_seeds(
    spark: SparkSession, seed_examples_dir: Path, seed: str, status: str, tx_id: str, count: Any, collections: Any
) -> None:
    """The seeds are bare payloads (schemas off), as the docs show them."""
    payload = _load(seed_examples_dir, seed)
    batch = decode_records(
        records_from_dicts(spark, [_rec("srv.transaction", 4, payload, {"id": tx_id})]),
        options=DecodeOptions(key_schemas_enabled=False, value_schemas_enabled=False),
    )
    rows = batch.transactions.collect()
    assert [(r["server"], r["status"], r["id"], r["event_count"]) for r in rows] == [("srv", status, tx_id, count)]
    got = None if rows[0]["data_collections"] is None else [tuple(c) for c in rows[0]["data_collections"]]
    assert got == collections
    assert batch.counts()["transactions"] == 1


def test_transaction_enriched_data_events(spark: SparkSession, seed_examples_dir: Path) -> None:
    """J4 / informix-14: numbers as strings in the doc; ``source: {}`` is a doc elision.

    As written (no ``source.connector``) the record is dead-lettered; with a real PostgreSQL source the
    transaction block decodes (string numbers accepted).
    """
    j4 = _load(seed_examples_dir, "postgresql-06")
    options = DecodeOptions(
        key_schemas_enabled=False,
        value_schemas_enabled=False,
        schema_source=ConnectSchemaSource({"public.a": {"pk": "string", "aa": "string"}}),
    )
    as_is = decode_records(records_from_dicts(spark, [_rec("fulfillment.public.a", 0, j4)]), options=options)
    assert [r["reason"] for r in as_is.dead_letters.collect()] == ["unsupported_connector"]
    fixed = {**j4, "source": {"connector": "postgresql", "name": "fulfillment", "schema": "public", "table": "a",
                              "sequence": '["24023119","24023128"]', "lsn": 24023128}}  # fmt: skip
    batch = decode_records(records_from_dicts(spark, [_rec("fulfillment.public.a", 0, fixed)]), options=options)
    (frame,) = batch.tables.values()
    assert _rows(frame, "pk", "aa", "_cdc_tx_id", "_cdc_tx_total_order", "_cdc_tx_data_collection_order") == [
        ("2", "1", "571", 1, 1)
    ]


def test_incremental_snapshot_seeds(spark: SparkSession, seed_examples_dir: Path) -> None:
    """J1 (PostgreSQL) / informix-02: ``source`` elided in the doc; filled with a real source block."""
    options = DecodeOptions(
        key_schemas_enabled=False,
        value_schemas_enabled=False,
        schema_source=ConnectSchemaSource({"s.t": {"pk": "string", "value": "string"}}),
    )
    for seed, src in [
        ("postgresql-02", {"connector": "postgresql", "name": "srv", "schema": "s", "table": "t", "lsn": 5}),
        ("informix-02", {"connector": "informix", "name": "srv", "schema": "s", "table": "t", "commit_lsn": "5"}),
    ]:
        event = _load(seed_examples_dir, seed)
        event["source"] = {**src, "snapshot": "incremental"}
        batch = decode_records(records_from_dicts(spark, [_rec("srv.s.t", 0, event)]), options=options)
        (frame,) = batch.tables.values()
        assert _rows(frame, "pk", "value", "_cdc_op", "_cdc_snapshot") == [("1", "New data", "r", "incremental")]


@pytest.mark.parametrize(
    ("seed", "key_seed", "topic", "database", "ddl"),
    [
        ("mysql-connector-02", "mysql-connector-01", "mysql-server-1", "inventory", "CREATE TABLE products"),
        ("mysql-connector-03", None, "mysql", "inventory", "ALTER TABLE customers ADD middle_name"),
        ("informix-10", "informix-11", "informix", "testdb", None),
    ],
)
def test_schema_change_seeds(
    spark: SparkSession, seed_examples_dir: Path, seed: str, key_seed: str | None, topic: str, database: str, ddl: Any
) -> None:
    """mysql-connector-02 is the legacy shape (``ts_sec``, no ``connector``): the connector is inferred."""
    value = _load(seed_examples_dir, seed)
    key = _load(seed_examples_dir, key_seed) if key_seed else None
    schemas = bool(value.get("schema"))
    if not schemas:
        value = value["payload"]
    batch = decode_records(
        records_from_dicts(spark, [_rec(topic, 0, value, key)]),
        options=DecodeOptions(value_schemas_enabled=schemas),
    )
    rows = batch.schema_changes.collect()
    assert len(rows) == 1
    row = rows[0]
    assert row["database_name"] == database
    assert (row["ddl"] or "").startswith(ddl or "")
    assert row["connector"] in ("mysql", "informix")
    if row["table_changes"] is not None:
        assert json.loads(row["table_changes"])[0]["table"]["primaryKeyColumnNames"] == ["id"]
    assert batch.counts()["schema_changes"] == 1
