"""The one place a SparkSession is built (jobs, CLI and tests all go through :func:`build_spark_session`)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdclake.gateway import jvm_class
from cdclake.lake.catalog import LakeConfig
from cdclake.paths import jars_in
from cdclake.settings import settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

#: Session settings every cdclake job runs with. The session time zone is pinned to UTC so that
#: zone-less values are never shifted by the machine's zone (see docs/types.md).
BASE_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "spark.sql.shuffle.partitions": "4",
    # cached batches (decoded change rows, replayed records) are not compressed: gathering the compression
    # statistics boxed every value and cost more than the memory it saved (docs/benchmarks.md)
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # compiled generated classes kept for reuse (Spark's default: 100). A small batch plans about 110 classes,
    # most of them the same source code every batch; with 100 they evict one another and every batch compiled
    # them all again (docs/benchmarks.md, small batches). Only the ones a batch's literals make new are compiled.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # a list of two or more values (the applier's filters on a batch's keys) becomes a hash set that the
    # generated code references, not a chain of comparisons with the values written into it: the code is then
    # the same every batch and found in that cache (Spark's defaults, 10 and 400, compiled 18 new classes for
    # each 64-record batch of the demo's 2 tables; docs/benchmarks.md)
    "spark.sql.optimizer.inSetConversionThreshold": "1",
    "spark.sql.optimizer.inSetSwitchThreshold": "0",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # PySpark's DataFrame debugging records the Python call site of every DataFrame and Column call in the
    # driver JVM, three to four more Py4J round trips each: a batch of 25 records made 18K round trips with it,
    # 5.3K without. The job's own errors name the record or the table.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark's Kafka reader keeps each task's consumer and its last fetch (up to max.partition.fetch.bytes) in
    # pools keyed by the read's group id, which is new for every read: nothing is reused from one batch to the
    # next. With the pools' 5-minute timeouts a follower's live heap grew to 0.8 GiB in 4 minutes at 1,000
    # events/s; with these it stays near 0.3 GiB (docs/benchmarks.md). Only a read's own tasks can reuse them (the
    # group id is the read's), and those follow one another without 30-s pauses.
    "spark.kafka.consumer.cache.timeout": "30s",
    "spark.kafka.consumer.cache.evictorThreadRunInterval": "10s",
    "spark.kafka.consumer.fetchedData.cache.timeout": "30s",
    "spark.kafka.consumer.fetchedData.cache.evictorThreadRunInterval": "10s",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}


def spark_jars() -> list[str]:
    """Paths of the jars cdclake adds to Spark (Iceberg runtime, Kafka source, SQLite JDBC).

    Raises:
        NotInstalledError: when ``make jars`` has not run.
    """
    return [str(p) for p in jars_in("spark")]


LOG4J2_CONF = Path(__file__).with_name("resources") / "log4j2-spark.properties"

#: Garbage collector of a driver JVM this process launches itself (local mode).
LOCAL_DRIVER_GC = "-XX:+UseParallelGC"

#: Thresholds of the optimising (C2) JIT compiler, four times the JDK's, in a driver this process launches. A
#: driver lives for one batch, and with the JDK's thresholds its C2 compiler threads spend as much CPU as the
#: tasks compiling Spark, Kafka and Iceberg code that runs a few thousand times (docs/benchmarks.md, Ingestion).
LOCAL_DRIVER_JIT = (
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=3000",
    "-XX:Tier4CompileThreshold=30000",
    "-XX:Tier4BackEdgeThreshold=150000",
)


#: The JVM's quick (C1) compiler only (``CDC_SPARK_JIT=quick``): code runs slower once hot, but none of the
#: optimising compiler's CPU is spent, which a driver of a few small batches on a busy machine never earns back.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def local_driver_options(jit: str | None = None) -> list[str]:
    """JVM options of a driver this process launches itself (local mode, where it does all the work).

    The throughput collector, which beats G1 on a batch job (shorter and steadier batches on
    2 cores), fewer optimising JIT compilations (:data:`LOCAL_DRIVER_JIT`; none with ``CDC_SPARK_JIT=quick``,
    :data:`QUICK_JIT`) and this machine's class-data
    sharing archive when there is one (:mod:`cdclake.cds`). The figures are in docs/benchmarks.md. ``jit``
    (``tiered`` or ``quick``) overrides ``CDC_SPARK_JIT``.
    """
    from cdclake import cds

    quick = (jit or settings().spark_jit) == "quick"
    return [LOCAL_DRIVER_GC, *([QUICK_JIT] if quick else LOCAL_DRIVER_JIT), *cds.driver_options()]


#: Hadoop's ``file:`` file system in a driver this process launches: Hadoop's own, but with permissions set through
#: ``java.nio`` instead of a ``chmod`` process for every file it writes (pyspark ships no native Hadoop library).
#: Built with the envelope decoder (``jvm/decoder``), see :func:`with_local_file_system`.
LOCAL_FILE_SYSTEM = "dev.cdclake.fs.NioLocalFileSystem"
DECODER_JAR_PREFIX = "cdclake-decoder-"


def with_local_file_system(conf: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``conf`` with :data:`LOCAL_FILE_SYSTEM` as the ``file:`` file system, and the jar that holds it (the
    decoder's, from ``spark.jars``), which the driver's class path needs (pure): spark-submit opens ``file:`` before
    it loads ``spark.jars``. Unchanged, and no jar, when ``conf`` names a ``file:`` file system itself or has no
    decoder jar."""
    decoder = [j for j in conf.get("spark.jars", "").split(",") if Path(j).name.startswith(DECODER_JAR_PREFIX)]
    if "spark.hadoop.fs.file.impl" in conf or not decoder:
        return dict(conf), None
    return {**conf, "spark.hadoop.fs.file.impl": LOCAL_FILE_SYSTEM}, decoder[0]


@contextmanager
def appended_class_path(jar: str | None) -> Iterator[None]:
    """Within the block, a driver JVM this process launches has ``jar`` at the end of its class path
    (``SPARK_DIST_CLASSPATH``, which Spark's launcher puts after Spark's jars); the environment is restored after it.

    After Spark's jars, ``jar`` leaves the class-data sharing archive valid (:mod:`cdclake.cds`: an archive maps
    when its class path is a prefix of the JVM's), and spark-submit's drivers, which lack it, map it too.
    """
    before = os.environ.get("SPARK_DIST_CLASSPATH")
    if jar is not None:
        os.environ["SPARK_DIST_CLASSPATH"] = os.pathsep.join(p for p in (before, jar) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_DIST_CLASSPATH", None)
        else:
            os.environ["SPARK_DIST_CLASSPATH"] = before


def with_driver_options(conf: Mapping[str, str], options: Sequence[str]) -> dict[str, str]:
    """``conf`` with ``options`` appended to ``spark.driver.extraJavaOptions`` (pure)."""
    joined = " ".join([conf.get("spark.driver.extraJavaOptions", ""), *options]).strip()
    return {**conf, "spark.driver.extraJavaOptions": joined}


def session_conf(lake: LakeConfig, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the full Spark configuration for a cdclake session on ``lake``: :data:`BASE_CONF`, the jars, the
    lake's catalog, then ``CDC_SPARK_CONF``'s settings, then ``extra``."""
    conf = dict(BASE_CONF)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = f"{conf[key]} -Dlog4j2.configurationFile={LOG4J2_CONF.as_uri()}"
    jars = spark_jars()
    if lake.s3:
        jars += [str(p) for p in jars_in("spark-s3", target="cluster-jars")]
    conf["spark.jars"] = ",".join(jars)
    conf.update(lake.spark_conf())
    conf.update(settings().spark_conf)
    if extra:
        conf.update(extra)
    return conf


def _preload_lake_client() -> None:
    """Import pyiceberg's catalog and Arrow IO (seconds of Python imports) in a background thread.

    The ingestion job reads and writes its ledger through pyiceberg (:mod:`cdclake.ingest.ledger`); started
    before the driver JVM, the imports run while the JVM starts, on the core it leaves idle.
    """

    def load() -> None:
        try:
            import pyiceberg.catalog.sql  # noqa: F401
            import pyiceberg.expressions  # noqa: F401
            import pyiceberg.io.pyarrow  # noqa: F401
        except Exception:  # noqa: BLE001 - only a head start; the real import reports any problem
            logger.debug("pyiceberg preload failed", exc_info=True)

    threading.Thread(target=load, name="cdclake-preload", daemon=True).start()


#: glibc's ``M_MMAP_THRESHOLD``: :func:`return_freed_memory` fixes it at :data:`MMAP_THRESHOLD`.
_M_MMAP_THRESHOLD = -3
#: Allocations of at least this many bytes get pages of their own, given back to the system when freed.
MMAP_THRESHOLD = 128 * 1024


def return_freed_memory() -> bool:
    """Make this Python process give the memory of large arrays back to the system when they are freed.

    The transactions phase groups a batch's rows with numpy and Arrow (:func:`cdclake.ingest.transactions.facts`):
    hundreds of MiB of intermediates for a million rows, freed when a part is grouped. With their defaults, two
    allocators keep them resident: glibc's malloc (numpy) raises its mmap threshold to the size of a freed large
    block (up to 32 MiB), so later arrays come from the heap, whose holes it does not return; Arrow's default pool
    (mimalloc) keeps freed pages for reuse. The driver would hold its high-water mark through the apply phase,
    beside the JVM's peak. Here glibc's threshold is fixed at :data:`MMAP_THRESHOLD` (``mallopt``) and Arrow
    allocates through glibc too (its system pool), unless ``ARROW_DEFAULT_MEMORY_POOL`` chooses a pool. Only this
    process: a JVM it launches keeps glibc's defaults. Figures in docs/benchmarks.md (peak RSS).

    Returns:
        whether glibc took the setting (False on a C library without ``mallopt``).
    """
    import ctypes
    import ctypes.util

    import pyarrow as pa

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def build_spark_session(
    app_name: str = "cdclake",
    *,
    lake: LakeConfig | None = None,
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    driver_options: Sequence[str] | None = None,
    local_file_system: bool = True,
) -> SparkSession:
    """Build (or reuse) the SparkSession with the project's jars and the lake's catalog; this Python process then
    gives the memory of large arrays back when they are freed (:func:`return_freed_memory`).

    Args:
        app_name: Spark application name.
        lake: the lake to register as catalog ``lake``; default from the environment.
        master: Spark master; default ``$CDC_SPARK_MASTER`` or ``local[*]``. Under spark-submit the
            master given to spark-submit wins. Outside spark-submit the driver heap is
            ``$CDC_SPARK_DRIVER_MEMORY`` (default ``900m``).
        extra_conf: further Spark settings, applied last.
        driver_options: JVM options of a driver this process launches itself, added to the base ones
            (default: :func:`local_driver_options`); ignored under spark-submit, and when ``extra_conf``
            sets ``spark.driver.extraJavaOptions``.
        local_file_system: a driver this process launches opens ``file:`` with :data:`LOCAL_FILE_SYSTEM`, its jar
            appended to the driver's class path (:func:`with_local_file_system`); False keeps Hadoop's own and the
            class path Spark's jars alone.

    Raises:
        NotInstalledError: when the project's jars have not been resolved.
    """
    from pyspark.sql import SparkSession

    lake = lake or LakeConfig.from_env()
    lake.ensure_dirs()
    # the machine's hostname may resolve to a loopback address; say which one to bind instead of warning
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (the MongoDB patch fold is a UDF) run the driver's interpreter, where cdclake is installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit (which sets PYSPARK_GATEWAY_PORT) the master given to spark-submit wins.
    conf = session_conf(lake, extra_conf)
    class_path: str | None = None  # a jar for the class path of the driver JVM this process launches
    if master or not os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = builder.master(master or settings().spark_master)
        # the JVM this process launches (under spark-submit, --driver-memory decides); a task holds one offset
        # slice, so 900 MiB held a 3M-event real-shape batch (docs/benchmarks.md)
        builder = builder.config("spark.driver.memory", settings().spark_driver_memory)
        if "spark.driver.extraJavaOptions" not in (extra_conf or {}):
            conf = with_driver_options(conf, local_driver_options() if driver_options is None else driver_options)
        if local_file_system:
            conf, class_path = with_local_file_system(conf)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _preload_lake_client()
    return_freed_memory()
    with appended_class_path(class_path):
        spark = builder.getOrCreate()
    compile_with_the_tasks_class_loader(spark)
    shorten_gateway_lookups(spark)
    logger.info("spark session %s (%s) on lake %s", app_name, spark.sparkContext.applicationId, lake.kind)
    return spark


def _private_field(obj: Any, name: str) -> Any:
    """The value of the field ``name`` (as Scala names a private one: ``...$$name``) of the Java object ``obj``."""
    cls = obj.getClass()
    while cls is not None:
        for fld in cls.getDeclaredFields():
            if fld.getName() == name or fld.getName().endswith("$$" + name):
                fld.setAccessible(True)
                return fld.get(obj)
        cls = cls.getSuperclass()
    raise LookupError(f"{obj.getClass().getName()} has no field {name}")


def compile_with_the_tasks_class_loader(spark: SparkSession) -> bool:
    """In a local-mode driver, give the calling thread's JVM thread (and the threads it starts later) the class
    loader the executor's tasks run with; returns whether it did.

    Spark keeps a compiled generated class per class loader and source code. The driver compiles each
    whole-stage class once before the job (to check it compiles), and the tasks, whose context class loader is
    the executor's, compiled it again: about a third of a batch's compilations (docs/benchmarks.md). The
    executor's loader is a child of the driver's (it adds the session's jars), so the driver resolves the same
    classes through it. Found through Spark's private fields (the local executor's default session state); on a
    Spark whose fields differ, or on a cluster, nothing changes.
    """
    if not spark.sparkContext.master.startswith("local"):
        return False
    try:
        dispatcher = _private_field(jvm_class(spark, "org.apache.spark.SparkEnv").get().rpcEnv(), "dispatcher")
        endpoints = _private_field(dispatcher, "endpointRefs").keySet().toArray()
        local = next(e for e in endpoints if e.getClass().getName() == "org.apache.spark.scheduler.local.LocalEndpoint")
        loader = _private_field(_private_field(local, "executor"), "defaultSessionState").replClassLoader()
        jvm_class(spark, "java.lang.Thread").currentThread().setContextClassLoader(loader)
    except Exception:  # noqa: BLE001 - an optimisation: a Spark it does not fit compiles as before
        logger.debug("the tasks' class loader was not found; generated classes compile per loader", exc_info=True)
        return False
    return True


#: Classes that PySpark's DataFrame and Column calls reach through the gateway's JVM view, by their simple names
#: (``sc._jvm.functions.col``, ``sc._jvm.PythonUtils.toSeq``) or fully qualified (each ``pyspark.sql.functions``
#: call looks ``org.apache.spark.sql.functions`` up).
PYSPARK_GATEWAY_CLASSES = (
    "org.apache.spark.sql.functions",
    "org.apache.spark.api.python.PythonUtils",
    "org.apache.spark.sql.api.python.PythonSQLUtils",
    "org.apache.spark.api.python.PythonRDD",
)


def shorten_gateway_lookups(spark: SparkSession) -> None:
    """Let PySpark reach the classes of :data:`PYSPARK_GATEWAY_CLASSES` and their static methods without asking the
    driver JVM where they are each time (idempotent); what its calls return is the same.

    Py4J sends a round trip for every class a Python attribute of the JVM view names, and another for every member
    of it, before the call itself. A simple name (``sc._jvm.PythonUtils``) is first tried as a class of that name,
    then under each of the view's star imports, each miss a class lookup over the driver's whole class path (about
    290 jars), 0.3-0.7 ms a lookup. The view gets these classes as attributes of its own, by both names, each one
    that keeps the static methods it found (:func:`static_members_class`): a ``pyspark.sql.functions`` call, once
    its function is known, is one round trip instead of three. A small batch makes about 1,900 such lookups
    (docs/benchmarks.md).
    """
    view, members = spark.sparkContext._jvm, static_members_class()
    for name in PYSPARK_GATEWAY_CLASSES:
        if not isinstance(view.__dict__.get(name), members):
            found = members(name, view._gateway_client)
            setattr(view, name, found)
            setattr(view, name.rsplit(".", 1)[1], found)


@cache
def static_members_class() -> type:
    """The class of a Py4J ``JavaClass`` that keeps the static methods it has looked up (a Py4J member of a static
    method holds no state of a call); its fields are read from the JVM every time. Py4J is imported when first
    asked."""
    from py4j.java_gateway import JavaClass, JavaMember

    class StaticMembers(JavaClass):  # type: ignore[misc]
        def __getattr__(self, name: str) -> Any:
            member = super().__getattr__(name)
            if isinstance(member, JavaMember):
                self.__dict__[name] = member  # found without __getattr__ from now on
            return member

    return StaticMembers


class SettingsLock:
    """Keeps a session's temporary settings to the statements they are set for, when threads share the session.

    A block that sets settings for its own statements (:func:`temporary_conf`, such as the broadcast threshold of
    a large batch's MERGE) holds it alone; a statement that a thread runs beside such blocks and
    whose plan or commit reads the session's settings (an Iceberg write, a join) holds it shared. The thread
    that holds it alone may take it again, either way; a thread that shares it cannot take it alone (it would
    wait for itself: a RuntimeError says so).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sharing = 0
        self._owner: int | None = None
        self._depth = 0
        self._mine = threading.local()  # how many times the calling thread shares it

    @contextmanager
    def alone(self) -> Iterator[None]:
        me = threading.get_ident()
        if getattr(self._mine, "sharing", 0):
            raise RuntimeError("a thread that shares the session's settings lock cannot take it alone")
        with self._changed:
            while self._owner not in (None, me) or (self._owner is None and self._sharing):
                self._changed.wait()
            self._owner, self._depth = me, self._depth + 1
        try:
            yield
        finally:
            with self._changed:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                    self._changed.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self._owner == threading.get_ident():  # inside its own block
            yield
            return
        with self._changed:
            while self._owner is not None:
                self._changed.wait()
            self._sharing += 1
        self._mine.sharing = getattr(self._mine, "sharing", 0) + 1
        try:
            yield
        finally:
            self._mine.sharing -= 1
            with self._changed:
                self._sharing -= 1
                if not self._sharing:
                    self._changed.notify_all()


#: The process's :class:`SettingsLock` (a process has one session).
SESSION_SETTINGS = SettingsLock()


@contextmanager
def temporary_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set Spark session settings for the block; the earlier values (or their absence) come back after it. Holds
    :data:`SESSION_SETTINGS` alone meanwhile: another thread's statements that share it wait."""
    with SESSION_SETTINGS.alone():
        saved = {key: spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)


#: The local property Spark describes a thread's jobs by, in its UI, its status API and its event log.
JOB_DESCRIPTION = "spark.job.description"


@contextmanager
def job_description(spark: SparkSession, text: str) -> Iterator[None]:
    """Within the block, the Spark jobs this thread starts (and the query stages they wait for) are described by
    ``text`` after the description of an enclosing block, e.g. ``cdclake pg: apply · inventory.customers · merge``:
    what a job of Spark's UI does for which table. Each thread has its own (a local property)."""
    sc = spark.sparkContext
    outer = sc.getLocalProperty(JOB_DESCRIPTION)
    sc.setLocalProperty(JOB_DESCRIPTION, f"{outer} · {text}" if outer else text)
    try:
        yield
    finally:
        sc.setLocalProperty(JOB_DESCRIPTION, outer)  # type: ignore[arg-type]  # None removes it


#: The Java error a JVM reports when its heap (or another of its memory areas) is exhausted.
OUT_OF_MEMORY = "java.lang.OutOfMemoryError"

#: What Spark says, inside a Py4J error's Java text, when the driver's memory ran short without the JVM's own
#: ``OutOfMemoryError`` reaching the caller, searched after it: the memory manager refusing a memory request
#: (``SparkOutOfMemoryError``, e.g. ``[UNABLE_TO_ACQUIRE_MEMORY]``), a broadcast join's table that did not fit
#: while it was built (``notEnoughMemoryToBuildAndBroadcastTableError``, a ``SparkException``), and a task's result
#: gone from the block manager before the driver read it (``TaskResultLost``; seen on this machine in the same
#: 1M-event batches at the 900m heap as the broadcast failure, docs/reliability.md).
SPARK_MEMORY_FAILURES = (
    "org.apache.spark.memory.SparkOutOfMemoryError",
    "Not enough memory to build and broadcast the table",
    "TaskResultLost (result lost from block manager)",
)


def out_of_memory(exc: BaseException) -> str | None:
    """What ran out of memory, from the text of ``exc`` or of an exception it was raised from or during (a Py4J
    error carries the Java stack trace in its text): the first ``java.lang.OutOfMemoryError: ...`` line, else the
    first line naming one of :data:`SPARK_MEMORY_FAILURES` from that name to its first sentence's end; None when
    neither is there (pure)."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(_text(current))
        current = current.__cause__ or current.__context__
    for marker in (OUT_OF_MEMORY, *SPARK_MEMORY_FAILURES):
        for text in texts:
            for line in text.splitlines():
                if marker in line:
                    found = line[line.index(marker) :].strip()
                    return found if marker == OUT_OF_MEMORY else found.split(". ", 1)[0].rstrip(".")
    return None


def _text(exc: BaseException) -> str:
    """``str(exc)``, or its arguments' text when that fails: a Py4J error asks its JVM for the Java error's text,
    and a JVM that has exited (killed by its own ``OutOfMemoryError``) no longer answers."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - any failure to describe it; what it was raised with is still known
        return " ".join(a for a in getattr(exc, "args", ()) if isinstance(a, str))


def driver_exited(spark: SparkSession) -> int | None:
    """The exit status of the session's driver JVM when this process started it and it has exited, else None
    (a driver that started this process, as ``spark-submit`` does, takes the process with it)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return None if proc is None else proc.poll()


def driver_failure(spark: SparkSession, exc: BaseException) -> str | None:
    """What happened to the session's driver when ``exc`` was raised: ``"ran out of memory (<the Java error>)"``
    (:func:`out_of_memory`) or ``"exited with status N"`` (:func:`driver_exited`), else None (``exc`` is an
    error of the work itself)."""
    oom = out_of_memory(exc)
    if oom is not None:
        return f"ran out of memory ({oom})"
    status = driver_exited(spark)
    return None if status is None else f"exited with status {status}"


def driver_max_heap(spark: SparkSession) -> int:
    """The most bytes the session's driver JVM heap may hold (``Runtime.maxMemory``; with the parallel collector
    it moves by a few MB as the collector resizes its survivor spaces)."""
    return int(jvm_class(spark, "java.lang.Runtime").getRuntime().maxMemory())


def more_heap_advice() -> str:
    """Where to give a driver that ran out of memory more heap, as the errors that report it say."""
    from cdclake.settings import settings

    return (
        f"CDC_SPARK_DRIVER_MEMORY (the CLI's and local jobs', now {settings().spark_driver_memory}) or "
        "spark.driver.memory in the Airflow task's conf"
    )
