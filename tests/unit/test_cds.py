"""The Spark driver's class-data sharing archive (cdclake.cds): which archive, when it is used, and that it maps."""

from __future__ import annotations

import os
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
    assert cds.driver_options() == []  # no archive yet: drivers start without one
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


def test_build_writes_through_a_partial_file_checks_it_then_replaces_stale_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file handling of build_archive; the two driver runs are stubbed here (the real ones: `make install`)."""
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path).parent.parent))
    monkeypatch.setenv("CDC_JVM_DIR", str(tmp_path / "jvm"))
    steps: list[tuple[str, str]] = []

    def driver(step: str, archive: Path, timeout_s: float) -> None:
        steps.append((step, archive.name))
        if step == "dump":
            archive.write_bytes(b"classes")

    monkeypatch.setattr(cds, "_run_driver", driver)
    folder = tmp_path / "jvm" / "cds"
    folder.mkdir(parents=True)
    stale, busy = folder / "spark-0000000000000000.jsa", folder / "spark-1111111111111111.jsa.999999.partial"
    stale.write_bytes(b"old jdk")
    busy.write_bytes(b"another process is writing this")
    built = cds.build_archive()
    assert built.built and built.path == cds.archive_path() and built.path.read_bytes() == b"classes"
    partial = f"{built.path.name}.{os.getpid()}.partial"
    assert steps == [("dump", partial), ("check", partial)]
    assert sorted(f.name for f in folder.iterdir()) == sorted([built.path.name, busy.name])
    assert not cds.build_archive().built and len(steps) == 2  # up to date: no driver runs
    assert cds.build_archive(rebuild=True).built and len(steps) == 4

    def refused(step: str, archive: Path, timeout_s: float) -> None:
        if step == "check":
            raise cds.CdsError("does not map")
        archive.write_bytes(b"bad")

    monkeypatch.setattr(cds, "_run_driver", refused)
    with pytest.raises(cds.CdsError, match="does not map"):
        cds.build_archive(rebuild=True)
    assert built.path.read_bytes() == b"classes"  # the archive in use is left alone
    assert not list(folder.glob(f"*.{os.getpid()}.partial"))


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
