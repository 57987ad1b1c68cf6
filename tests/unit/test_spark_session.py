"""The session every job, CLI command and test builds (cdclake.spark.build_spark_session)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_the_local_driver_runs_utc_with_the_throughput_collector(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert jvm.java.lang.System.getProperty("user.timezone") == "UTC"
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    # -XX:+UseParallelGC (LOCAL_DRIVER_GC); G1 would be "G1 Young Generation" / "G1 Old Generation"
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
