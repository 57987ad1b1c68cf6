"""Decoded rows of the live captures equal the database's own rows, column by column, schemas on and off.

For each capture (PostgreSQL, MariaDB) and converter setting (schemas on / off) the capture is decoded and
compared with ``<db>_all_types.rows.json`` (``tests/support/capture_equality.py``):

* the ``r`` events, per key, are compared with ``after_snapshot``;
* the latest event per key (greatest ``_cdc_position``; ``d`` removes the key; columns listed in
  ``_cdc_keep_columns`` keep the key's previous value) is compared with ``after_stream``.

Schemas off: the schema source is the **connector-side schema**: the Connect ``Value`` struct schema of the
paired schemas-on capture's ``after`` field, given to :class:`ConnectSchemaSource` (what the connector itself
declared for the table; nothing is inferred from values). ``tests/integration/test_schemas_off_captures.py``
decodes the same captures with the types read from the live database instead.
"""

from __future__ import annotations

import pytest
from capture_equality import assert_equal_to_database, decoded
from pyspark.sql import SparkSession


@pytest.mark.spark
@pytest.mark.parametrize("schemas", [True, False], ids=["schemas", "noschemas"])
@pytest.mark.parametrize("which", ["pg", "mariadb"])
def test_decoded_rows_equal_database_rows(spark: SparkSession, which: str, schemas: bool) -> None:
    assert_equal_to_database(which, *decoded(spark, which, schemas))


@pytest.mark.spark
@pytest.mark.parametrize("schemas", [True, False], ids=["schemas", "noschemas"])
def test_wide_numerics_are_exact(spark: SparkSession, schemas: bool) -> None:
    """The values rows.json only has as floats, against the literals inserted by make_captures.py."""
    pg = {r["id"]: r for r in decoded(spark, "pg", schemas)[0] if r["_cdc_op"] == "r"}
    assert pg[1]["c_numeric_big"] == "1234567890123456789012345678901234567890.0123456789"
    assert pg[3]["c_numeric_big"] == "-0.0000000001"
    assert pg[1]["c_numeric_var"] == "3.14159265358979323846264338327950288"
    assert pg[3]["c_numeric_var"] == "0"
    maria = {r["id"]: r for r in decoded(spark, "mariadb", schemas)[0] if r["_cdc_op"] == "r"}
    assert maria[1]["c_decimal_big"] == "12345678901234567890123456789012345678901234567890123.0123456789"
    assert maria[3]["c_decimal_big"] == "-0.0000000001"
