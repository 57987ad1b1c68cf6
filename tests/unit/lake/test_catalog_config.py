"""The lake a Spark session opens is found again from the session's settings (pyiceberg then opens the same)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdclake.exceptions import ConfigError
from cdclake.lake import LakeConfig
from cdclake.lake.catalog import unquote


def test_an_embedded_lake_round_trips_through_the_spark_settings(tmp_path: Path) -> None:
    lake = LakeConfig.embedded(tmp_path / "lake")
    found = LakeConfig.from_spark_conf(lake.spark_conf())
    assert found.pyiceberg_properties() == lake.pyiceberg_properties()
    assert found.catalog_db == lake.catalog_db


def test_a_rest_lake_with_object_storage_round_trips() -> None:
    s3 = {"s3.endpoint": "http://minio:9000", "s3.access-key-id": "k", "s3.secret-access-key": "s",
          "s3.region": "us-east-1", "s3.path-style-access": "true"}  # fmt: skip
    lake = LakeConfig(kind="rest", uri="http://rest:8181", warehouse="s3://lake/", s3=s3)
    found = LakeConfig.from_spark_conf(lake.spark_conf())
    assert found.pyiceberg_properties() == lake.pyiceberg_properties()


def test_a_session_without_the_lake_catalog_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"spark\.sql\.catalog\.lake\.type"):
        LakeConfig.from_spark_conf({"spark.app.name": "x"})


@pytest.mark.parametrize(
    ("name", "parts"),
    [("`lake`.`cdc_audit`.`batches`", ("lake", "cdc_audit", "batches")), ("lake.ns.t", ("lake", "ns", "t")),
     ("`lake`.`a.b`.`c``d`", ("lake", "a.b", "c`d"))],
)  # fmt: skip
def test_unquote(name: str, parts: tuple[str, ...]) -> None:
    assert unquote(name) == parts
