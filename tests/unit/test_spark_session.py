"""The session every job, CLI command and test builds (cdclake.spark.build_spark_session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdclake.spark import LOCAL_DRIVER_JIT, QUICK_JIT, local_driver_options

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


def test_cdc_spark_jit_quick_gives_a_launched_driver_the_quick_compiler_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CDC_SPARK_JIT", "tiered")
    assert QUICK_JIT not in local_driver_options() and set(LOCAL_DRIVER_JIT) <= set(local_driver_options())
    monkeypatch.setenv("CDC_SPARK_JIT", "quick")
    quick = local_driver_options()
    assert QUICK_JIT in quick and not set(LOCAL_DRIVER_JIT) & set(quick)
    assert QUICK_JIT not in local_driver_options(jit="tiered")  # the argument wins over the variable


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


def test_the_local_driver_sets_file_permissions_without_a_chmod_process(spark: SparkSession, tmp_path: Path) -> None:
    from cdclake.spark import LOCAL_FILE_SYSTEM

    jvm = spark.sparkContext._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(
        jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration()
    )
    assert fs.getClass().getName() == LOCAL_FILE_SYSTEM
    target = tmp_path / "f"
    target.write_text("x")
    path = jvm.org.apache.hadoop.fs.Path(target.as_uri())
    for mode in (0o640, 0o755, 0o600, 0o000, 0o777):
        fs.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
        assert target.stat().st_mode & 0o7777 == mode, oct(mode)
    # a mode java.nio cannot set goes to Hadoop's chmod, as before
    fs.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(0o1755))
    assert target.stat().st_mode & 0o7777 == 0o1755


def test_files_spark_writes_get_the_modes_hadoop_gives_them(spark: SparkSession, tmp_path: Path) -> None:
    """Parquet files and their checksums, written through the session's ``file:`` file system: the same modes as
    Hadoop's own file system gives (files rw-r--r-- under umask 022, checksums the same)."""
    out = tmp_path / "t"
    spark.range(3).write.parquet(out.as_uri())
    written = [p for p in out.iterdir() if p.name.endswith(".parquet") or p.name.endswith(".parquet.crc")]
    assert len(written) >= 2
    assert {p.stat().st_mode & 0o777 for p in written} == {0o644}
    assert sorted(r.id for r in spark.read.parquet(out.as_uri()).collect()) == [0, 1, 2]


def test_the_local_file_system_class_goes_on_the_driver_class_path_only_while_the_driver_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from cdclake.spark import LOCAL_FILE_SYSTEM, appended_class_path, with_local_file_system

    jars = "/j/iceberg.jar,/j/cdclake-decoder-0.1.0.jar"
    conf, jar = with_local_file_system({"spark.jars": jars})
    assert (conf["spark.hadoop.fs.file.impl"], jar) == (LOCAL_FILE_SYSTEM, "/j/cdclake-decoder-0.1.0.jar")
    named = {"spark.jars": jars, "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}
    assert with_local_file_system(named) == (named, None)  # a file system named in the settings stays
    assert with_local_file_system({"spark.jars": "/j/iceberg.jar"}) == ({"spark.jars": "/j/iceberg.jar"}, None)
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/hadoop/*")
    with appended_class_path(jar):
        assert os.environ["SPARK_DIST_CLASSPATH"] == f"/hadoop/*{os.pathsep}/j/cdclake-decoder-0.1.0.jar"
    assert os.environ["SPARK_DIST_CLASSPATH"] == "/hadoop/*"
    monkeypatch.delenv("SPARK_DIST_CLASSPATH")
    with appended_class_path(jar):
        assert os.environ["SPARK_DIST_CLASSPATH"] == "/j/cdclake-decoder-0.1.0.jar"
    assert "SPARK_DIST_CLASSPATH" not in os.environ


def test_the_kafka_readers_pools_let_go_of_a_batchs_consumers_and_fetches_within_a_minute(spark: SparkSession) -> None:
    """Each read's consumers and fetches are keyed by its own group id: kept for Spark's default 5 minutes, a
    follower's driver holds every batch's of the last 5 minutes (docs/benchmarks.md, continuous mode)."""
    conf = spark.sparkContext.getConf()
    for pool in ("spark.kafka.consumer.cache", "spark.kafka.consumer.fetchedData.cache"):
        assert conf.get(f"{pool}.timeout") == "30s"
        assert conf.get(f"{pool}.evictorThreadRunInterval") == "10s"


def test_compiled_classes_outlive_a_batchs_worth_of_other_queries(spark: SparkSession) -> None:
    # BASE_CONF's spark.sql.codegen.cache.maxEntries: a small batch plans about 110 generated classes; with Spark's
    # default of 100 the first was evicted by the others and compiled again by the next batch
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def run(i: int) -> None:  # the literal goes into the generated code: each i makes classes of its own
        assert spark.range(1).selectExpr(f"id + {i} AS x").collect()[0]["x"] == i

    run(0)
    before = compilations.getCount()
    for i in range(1, 111):
        run(i)
    assert compilations.getCount() - before > 100  # more than Spark's default keeps
    before = compilations.getCount()
    run(0)
    assert compilations.getCount() == before


def test_the_driver_and_the_tasks_compile_a_generated_class_once(spark: SparkSession) -> None:
    from cdclake.spark import compile_with_the_tasks_class_loader

    jvm = spark.sparkContext._jvm
    compilations = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    thread = jvm.java.lang.Thread.currentThread()
    tasks_loader = thread.getContextClassLoader()

    def compiled(factor: int) -> int:  # a query of a literal no other runs: its classes are new
        before = compilations.getCount()
        assert spark.range(3).selectExpr(f"id * {factor} AS x").collect()[2]["x"] == 2 * factor
        return int(compilations.getCount() - before)

    try:
        thread.setContextClassLoader(tasks_loader.getParent())  # the driver's own loader, as Spark leaves it
        apart = compiled(7919)
        assert compile_with_the_tasks_class_loader(spark)
        assert thread.getContextClassLoader().equals(tasks_loader)
        shared = compiled(7927)
    finally:
        thread.setContextClassLoader(tasks_loader)
    assert apart >= 2  # the whole-stage class: once in the driver, once in the task
    assert shared == apart - 1


def test_pysparks_functions_and_python_utilities_are_called_in_one_round_trip_once_found(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import functions as F

    from cdclake.spark import PYSPARK_GATEWAY_CLASSES

    view = spark.sparkContext._jvm
    for name in PYSPARK_GATEWAY_CLASSES:  # by either name, the same class
        assert getattr(view, name)._fqn == getattr(view, name.rsplit(".", 1)[1])._fqn == name
    F.lit(1), F.expr("1"), view.PythonUtils.toSeq([])  # each function found once
    client = spark.sparkContext._gateway._gateway_client
    send, sent = client.send_command, []

    def counted(command: str, *args: object) -> object:
        sent.append(command.split("\n", 3)[:3])
        return send(command, *args)

    monkeypatch.setattr(client, "send_command", counted)
    two, three, empty = F.lit(2), F.expr("1 + 2"), view.PythonUtils.toSeq([])
    monkeypatch.undo()
    calls = [c for c in sent if c[0] not in ("m", "i")]  # Py4J releasing objects; the Java list of []
    assert calls == [
        ["c", "z:org.apache.spark.sql.functions", "lit"],
        ["c", "z:org.apache.spark.sql.functions", "expr"],
        ["c", "z:org.apache.spark.api.python.PythonUtils", "toSeq"],
    ]
    assert tuple(spark.range(1).select(two.alias("a"), three.alias("b")).first()) == (2, 3)
    assert empty.size() == 0


def test_a_class_keeping_its_static_members_keeps_methods_and_reads_fields_each_time(spark: SparkSession) -> None:
    from cdclake.spark import static_members_class

    client = spark.sparkContext._gateway._gateway_client
    integers = static_members_class()("java.lang.Integer", client)
    assert integers.valueOf("7") == 7 and "valueOf" in vars(integers)
    assert integers.MAX_VALUE == 2**31 - 1 and "MAX_VALUE" not in vars(integers)
    holder = static_members_class()("java.lang.System", client)
    holder.setProperty("cdclake.test.static", "a")
    assert holder.getProperty("cdclake.test.static") == "a"
    holder.setProperty("cdclake.test.static", "b")  # a kept method still calls the JVM
    assert holder.getProperty("cdclake.test.static") == "b"


def _described_jobs(spark: SparkSession, after: int) -> dict[int, str | None]:
    """The descriptions of the session's jobs numbered above ``after``, as Spark's status store has them."""
    import time

    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while True:
        jobs = store.jobsList(None)
        found = {
            int(job.jobId()): (job.description().get() if job.description().isDefined() else None)
            for job in (jobs.apply(i) for i in range(jobs.length()))
            if int(job.jobId()) > after
        }
        # the store is fed by a listener, after the jobs end
        if len(found) >= 3 or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_job_description_names_a_threads_jobs_inside_the_block_nested_blocks_add_to_it(spark: SparkSession) -> None:
    import threading

    from cdclake.spark import JOB_DESCRIPTION, job_description

    sc = spark.sparkContext
    last = max(sc.statusTracker().getJobIdsForGroup(None) or [-1])
    seen_elsewhere: list[str | None] = []
    with job_description(spark, "cdclake pg: apply"):
        spark.range(3).collect()
        with job_description(spark, "inventory.customers · merge"):
            spark.range(4).collect()
            # another thread's jobs are not described by this one's block
            other = threading.Thread(target=lambda: seen_elsewhere.append(sc.getLocalProperty(JOB_DESCRIPTION)))
            other.start()
            other.join()
        assert sc.getLocalProperty(JOB_DESCRIPTION) == "cdclake pg: apply"
    assert sc.getLocalProperty(JOB_DESCRIPTION) is None
    spark.range(5).collect()
    descriptions = sorted(_described_jobs(spark, last).items())
    assert [d for _, d in descriptions][:2] == ["cdclake pg: apply", "cdclake pg: apply · inventory.customers · merge"]
    assert descriptions[2][1] != "cdclake pg: apply"  # the block's description ended with it
    assert seen_elsewhere == [None]
