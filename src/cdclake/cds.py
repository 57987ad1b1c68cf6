"""Class-data sharing (CDS) archive of the Spark driver JVM: a faster start for every job.

A fresh driver JVM loads, verifies and links tens of thousands of classes (Spark, Iceberg, Parquet, the
SQLite JDBC driver) before its first batch is done. The JDK's dynamic CDS writes the classes one run
loaded into an archive (``-XX:ArchiveClassesAtExit``) that later JVMs map instead
(``-XX:SharedArchiveFile``), which makes every start shorter (``benchmarks/bench_start.py`` measures it; the
figure is in docs/benchmarks.md).

An archive is only valid for the JVM build and the class path it was written with. Its file name carries
a fingerprint of both (the java binary and its class image, and the jars of Spark's ``jars/`` directory:
names, sizes, modification times), so an upgrade of either leaves the old archive unused and drivers
start without one until ``cdclake spark cds`` (``make install``) writes a new one. A JVM given an archive it
cannot use starts without it and says nothing (``-Xshare:auto`` with the ``cds`` logs off).

``$CDC_SPARK_CDS=off`` leaves the archive out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cdclake.exceptions import CdcError
from cdclake.paths import jvm_dir
from cdclake.settings import Settings, settings

logger = logging.getLogger(__name__)

CDS_ENV = Settings.env_name("spark_cds")
ARCHIVE_PREFIX = "spark-"
ARCHIVE_SUFFIX = ".jsa"
#: Options that map an archive when it fits the JVM and its class path, and start without it, quietly, if not.
QUIET_AUTO = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")


class CdsError(CdcError):
    """The class-data sharing archive could not be written or does not load."""


def java_binary() -> Path | None:
    """The ``java`` that spark-submit launches the driver with: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return (Path(home) / "bin" / "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def spark_jars_dir() -> Path:
    """Spark's ``jars/`` directory, the driver's class path: ``$SPARK_HOME/jars``, else pyspark's own."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def fingerprint(java: Path, jars: Path) -> str:
    """A short hash of what an archive depends on: the JVM build and the class path's jars (pure but for ``stat``)."""
    digest = hashlib.sha256()
    for path in (java, java.parent.parent / "lib" / "modules"):
        stat = path.stat() if path.is_file() else None
        digest.update(f"{path}|{stat.st_size if stat else '-'}|{stat.st_mtime_ns if stat else '-'}\n".encode())
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else []:
        stat = jar.stat()
        digest.update(f"{jar}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    """Where the archive for this JVM and class path lives (``<jvm dir>/cds/spark-<fingerprint>.jsa``).

    Returns:
        The path (which may not exist yet), or None when there is no ``java`` to fingerprint.
    """
    java = java_binary()
    if java is None:
        return None
    return jvm_dir() / "cds" / f"{ARCHIVE_PREFIX}{fingerprint(java, spark_jars_dir())}{ARCHIVE_SUFFIX}"


def enabled() -> bool:
    """False when ``$CDC_SPARK_CDS`` is ``off`` (or ``0``, ``false``, ``no``)."""
    return settings().spark_cds != "off"


def driver_options() -> list[str]:
    """The driver JVM options that map this machine's archive, or none when there is no archive (or it is off)."""
    if not enabled():
        return []
    path = archive_path()
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", *QUIET_AUTO]


@dataclass(frozen=True)
class ArchiveResult:
    """What :func:`build_archive` did."""

    path: Path
    built: bool
    size: int
    seconds: float


def build_archive(*, rebuild: bool = False, timeout_s: float = 900.0) -> ArchiveResult:
    """Write the archive for this JVM and class path, unless it exists (``rebuild`` writes it again).

    A driver JVM runs a small Iceberg workload (:mod:`cdclake.cds_warmup`) and writes the classes it loaded when it
    exits; a second JVM must then start with ``-Xshare:on`` on it (which fails on an archive it cannot map)
    before it replaces the old one (each process writes its own partial file, so concurrent builds do not
    collide). Archives of other fingerprints in the folder are removed.

    Raises:
        CdsError: when there is no ``java``, or a JVM fails to write or to map the archive.
    """
    target = archive_path()
    if target is None:
        raise CdsError("no java binary found (set JAVA_HOME or put java on PATH)")
    if target.is_file() and not rebuild:
        return ArchiveResult(target, built=False, size=target.stat().st_size, seconds=0.0)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    started = time.monotonic()
    try:
        _run_driver("dump", partial, timeout_s)
        if not partial.is_file():
            raise CdsError(f"the driver JVM exited without writing {partial}")
        _run_driver("check", partial, timeout_s)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    for other in target.parent.glob(f"{ARCHIVE_PREFIX}*{ARCHIVE_SUFFIX}"):  # never another process's partial file
        if other != target:
            other.unlink(missing_ok=True)
    return ArchiveResult(target, built=True, size=target.stat().st_size, seconds=time.monotonic() - started)


def _run_driver(step: str, archive: Path, timeout_s: float) -> None:
    cmd = [sys.executable, "-m", "cdclake.cds_warmup", step, str(archive)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "JDK_JAVA_OPTIONS")}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CdsError(f"class-data sharing {step} of {archive} did not finish in {timeout_s:.0f}s") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise CdsError(f"class-data sharing {step} of {archive} failed (exit {proc.returncode}):\n{tail}")
