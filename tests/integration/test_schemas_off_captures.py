"""The schemas-off all-types captures, decoded with the column types read from the live database.

``tests/fixtures/captures/{pg,mariadb}_all_types_noschemas.jsonl`` are real captures of the ``all_types`` tables
(every PostgreSQL / MariaDB type the decoder maps) by a connector with ``schemas.enable=false``. Here nothing
gives the decoder a schema but :class:`cdclake.databases.schema_source.DatabaseSchemaSource`: it reads
``all_types``' catalog from the local stack's database (the demo schema creates the table with the DDL the
captures were made with) and maps it as the connector does, under the modes of the project's spec. The decoded
rows must equal the database's own rows, column by column, as the schemas-on capture's do
(``tests/unit/decode/test_capture_equality.py``).
"""

from __future__ import annotations

import pytest
from capture_equality import assert_equal_to_database, decode_capture
from pyspark.sql import SparkSession

from cdclake.connectors import ConnectorSpec, load_spec
from cdclake.connectors.loader import parse_spec
from cdclake.connectors.properties import BIGINT_UNSIGNED_HANDLING_MODE
from cdclake.databases import resolve_connection
from cdclake.databases.schema_source import DatabaseSchemaSource
from cdclake.demo.database import apply_demo_schema
from cdclake.stack import Stack

pytestmark = [pytest.mark.integration("stack"), pytest.mark.spark]

SPECS = {"pg": "postgres", "mariadb": "mariadb"}


def _capture_spec(which: str) -> ConnectorSpec:
    """The project's spec, with the type modes the capture was recorded under.

    The MariaDB capture predates the spec's ``bigint.unsigned.handling.mode=precise``: it was recorded with
    Debezium's default, ``long`` (``c_bigint_u`` arrives as int64 and wraps above 2^63; see the normaliser).
    """
    spec = load_spec(SPECS[which])
    if which != "mariadb":
        return spec
    raw = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["extra"] = {**raw.get("extra", {}), BIGINT_UNSIGNED_HANDLING_MODE: "long"}
    raw["extra_overrides"] = [*raw.get("extra_overrides", []), BIGINT_UNSIGNED_HANDLING_MODE]
    return parse_spec(raw, source=spec.source_path)


@pytest.mark.parametrize("which", ["pg", "mariadb"])
def test_noschemas_capture_with_types_from_the_live_database_equals_its_rows(
    stack: Stack, spark: SparkSession, which: str
) -> None:
    apply_demo_schema(stack)
    spec = _capture_spec(which)
    source = DatabaseSchemaSource(spec, resolve_connection(spec))
    try:
        rows, names = decode_capture(spark, which, schemas=False, schema_source=source)
    finally:
        source.close()
    assert sum(source.reads.values()) == 1, source.reads  # read once for the batch
    assert_equal_to_database(which, rows, names)
