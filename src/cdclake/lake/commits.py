"""Iceberg commits whose snapshot summaries carry the calling thread's properties."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from cdclake.gateway import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def sql_committing(spark: SparkSession, sql: str, properties: Mapping[str, str]) -> None:
    """Run ``sql`` (a statement that commits to Iceberg tables, such as a ``MERGE`` or a ``DELETE``; what it returns
    is dropped) on the calling thread, each of its commits carrying ``properties`` in its snapshot summary.

    Through ``dev.cdclake.spark.Commits`` (cdclake's jar): Iceberg's per-thread commit properties, which the
    session's other threads' commits do not see. Unlike the session's ``spark.sql.iceberg.snapshot-property.*``
    settings (:func:`cdclake.spark.temporary_conf`), no setting changes and no other thread's statement waits; a
    statement that plans or commits with the session's other settings still holds
    :data:`cdclake.spark.SESSION_SETTINGS` shared.
    """
    commits = jvm_class(spark, "dev.cdclake.spark.Commits")
    commits.sql(spark._jsparkSession, sql, dict(properties))  # type: ignore[attr-defined]
