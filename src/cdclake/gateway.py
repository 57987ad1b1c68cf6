"""Reaching JVM classes through a Spark session's Py4J gateway."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def jvm_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (fully qualified) through the session's gateway, in one round trip (an attribute
    chain such as ``_jvm.org.apache.iceberg...`` makes one per package, each a failed class lookup over the class
    path)."""
    return getattr(spark.sparkContext._jvm, name)
