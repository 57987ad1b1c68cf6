"""What `cdclake lake info --json` tells DuckDB: a REST lake's S3 secret and ATTACH, and each table's expression."""

from __future__ import annotations

from cdclake.lake import LakeConfig
from cdclake.lake.readers import duckdb_setup, duckdb_table

REST = LakeConfig(
    kind="rest",
    uri="http://127.0.0.1:8181",
    warehouse="s3://warehouse/",
    s3={
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.access-key-id": "CDCKEY",
        "s3.secret-access-key": "it's-secret",
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    },
)


def test_a_rest_lake_on_s3_is_attached_after_its_secret() -> None:
    assert duckdb_setup(REST) == [
        "CREATE OR REPLACE SECRET lake_s3 (TYPE s3, KEY_ID 'CDCKEY', SECRET 'it''s-secret', REGION 'us-east-1', "
        "ENDPOINT '127.0.0.1:9000', USE_SSL false, URL_STYLE 'path')",
        "ATTACH 's3://warehouse/' AS lake (TYPE iceberg, ENDPOINT 'http://127.0.0.1:8181', AUTHORIZATION_TYPE 'none')",
    ]


def test_a_rest_lake_without_object_store_settings_is_only_attached() -> None:
    lake = LakeConfig(kind="rest", uri="https://catalog.example", warehouse="prod")
    assert duckdb_setup(lake) == [
        "ATTACH 'prod' AS lake (TYPE iceberg, ENDPOINT 'https://catalog.example', AUTHORIZATION_TYPE 'none')"
    ]


def test_tables_are_named_in_the_attached_catalog_or_scanned_from_their_metadata() -> None:
    ident = ("pg", "inventory", "customers")
    assert duckdb_table(REST, ident, "s3://warehouse/x.metadata.json") == 'lake."pg.inventory"."customers"'
    embedded = LakeConfig.embedded("/lake")
    assert duckdb_table(embedded, ident, "file:///lake/m'1.json") == "iceberg_scan('file:///lake/m''1.json')"
    assert duckdb_setup(embedded) == []
