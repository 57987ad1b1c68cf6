"""The session every job, CLI command and test builds (cdclake.spark.build_spark_session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdclake.spark import LOCAL_DRIVER_JIT

pytestmark = pytest.mark.spark


def test_the_local_driver_runs_utc_with_the_throughput_collector_and_fewer_c2_compilations(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert jvm.java.lang.System.getProperty("user.timezone") == "UTC"
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    # -XX:+UseParallelGC (LOCAL_DRIVER_GC); G1 would be "G1 Young Generation" / "G1 Old Generation"
    assert collectors == {"PS Scavenge", "PS MarkSweep"}
    # LOCAL_DRIVER_JIT: the optimising compiler's thresholds, as the JVM took them
    diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    for option in LOCAL_DRIVER_JIT:
        name, value = option.removeprefix("-XX:").split("=")
        assert diagnostic.getVMOption(name).getValue() == value


def test_cdc_spark_conf_adds_to_the_sessions_settings_and_code_given_settings_win(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cdclake.lake import LakeConfig
    from cdclake.spark import BASE_CONF, session_conf

    lake = LakeConfig.embedded(tmp_path)
    monkeypatch.delenv("CDC_SPARK_CONF", raising=False)
    assert session_conf(lake)["spark.sql.shuffle.partitions"] == BASE_CONF["spark.sql.shuffle.partitions"]
    monkeypatch.setenv("CDC_SPARK_CONF", "spark.sql.shuffle.partitions=48;spark.dynamicAllocation.enabled=true")
    conf = session_conf(lake, {"spark.dynamicAllocation.enabled": "false"})
    assert conf["spark.sql.shuffle.partitions"] == "48"
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert conf["spark.sql.catalog.lake.type"] == "jdbc"  # the lake's catalog is still there


def test_pyspark_does_not_record_the_python_call_site_of_every_dataframe_call(spark: SparkSession) -> None:
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
