"""The Spark driver's class-data sharing archive (cdclake.cds): which archive, when it is used, and that it maps."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cdclake import cds


def _fake_jdk(root: Path) -> Path:
    java = root / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    (root / "jdk" / "lib").mkdir()
    (root / "jdk" / "lib" / "modules").write_bytes(b"m" * 10)
    return java


def test_the_fingerprint_follows_the_jvm_and_every_jar_of_the_class_path(tmp_path: Path) -> None:
    java = _fake_jdk(tmp_path)
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    (jars / "b.jar").write_bytes(b"b")
    first = cds.fingerprint(java, jars)
    assert cds.fingerprint(java, jars) == first
    (jars / "b.jar").write_bytes(b"bb")  # a rebuilt jar
    second = cds.fingerprint(java, jars)
    (jars / "c.jar").write_bytes(b"c")  # one jar more
    third = cds.fingerprint(java, jars)
    (tmp_path / "jdk" / "lib" / "modules").write_bytes(b"m" * 11)  # another JDK build
    fourth = cds.fingerprint(java, jars)
    assert len({first, second, third, fourth}) == 4


def test_driver_options_map_the_archive_only_when_it_exists_and_is_not_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path).parent.parent))
    monkeypatch.setenv("CDC_JVM_DIR", str(tmp_path / "jvm"))
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    path = cds.archive_path()
    assert path is not None and path.parent == tmp_path / "jvm" / "cds"
    assert re.fullmatch(r"spark-[0-9a-f]{16}\.jsa", path.name)
    assert cds.driver_options() == []  # no archive yet: drivers start as before
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert cds.driver_options() == [
        f"-XX:SharedArchiveFile={path}",
        "-Xshare:auto",
        "-Xlog:cds=off",
        "-Xlog:cds+dynamic=off",
    ]
    monkeypatch.setenv(cds.CDS_ENV, "off")
    assert cds.driver_options() == []


@pytest.mark.spark
def test_the_local_driver_maps_the_archive_make_install_wrote(spark: SparkSession) -> None:
    """`make install` (`cdclake spark cds`) wrote the archive before the tests' driver started; it is mapped."""
    path = cds.archive_path()
    assert path is not None and path.is_file(), "no class-data sharing archive: run `make install` (cdclake spark cds)"
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={path}" in arguments
    java = cds.java_binary()
    assert java is not None
    pid = jvm.java.lang.ProcessHandle.current().pid()
    info = subprocess.run(
        [str(java.parent / "jcmd"), str(pid), "VM.info"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    mapped = re.search(r"CDS archive\(s\) mapped at: .*?size (\d+)", info)
    # the JDK's own base archive alone is about 13 MiB; mapped with ours on top it is larger than our file
    assert mapped is not None, info[:2000]
    assert int(mapped.group(1)) > path.stat().st_size
