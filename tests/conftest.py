"""Shared fixtures and markers.

* ``tests/unit``: no network, no services; Spark tests use the session-scoped ``spark`` fixture.
* ``tests/integration``: marked ``integration``; they use the local stack (``cdclake stack up``).
* ``tests/dags``: DAG integrity and policy.
* ``tests/reliability``: marked ``reliability``; faults on the local stack and hostile input.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.stack import Stack

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("CDC_SHARED_DIR", PROJECT_ROOT.parent / "shared"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.iter_markers()):
            item.add_marker(pytest.mark.unmarked)
        if "stack" in getattr(item, "fixturenames", ()):
            # `make test` runs these in one pytest process and the others in a second one beside it
            item.add_marker(pytest.mark.shared_stack)


@pytest.fixture(scope="session", autouse=True)
def _isolate_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep a developer's ~/.pyiceberg.yaml and lake settings out of the tests."""
    saved = {
        k: os.environ.get(k)
        for k in (
            "PYICEBERG_HOME",
            "CDC_LAKE_KIND",
            "CDC_LAKE_DIR",
            "TZ",
            "CDC_STACK_PROFILE",
            "CDC_SPARK_MASTER",
            "CDC_SPARK_JIT",
        )
    }
    os.environ["PYICEBERG_HOME"] = str(tmp_path_factory.mktemp("pyiceberg-home"))
    for key in ("CDC_LAKE_KIND", "CDC_STACK_PROFILE", "CDC_SPARK_MASTER"):
        os.environ.pop(key, None)
    os.environ["CDC_LAKE_DIR"] = str(tmp_path_factory.mktemp("lake-default"))
    # every driver the tests start (CLI runs, Airflow tasks, benchmarks) lives for a few small batches, on a
    # machine the rest of the suite keeps busy: the optimising JIT's CPU would not pay back
    os.environ.setdefault("CDC_SPARK_JIT", "quick")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ``shared/`` folder beside the checkout (reference docs and seed examples)."""
    if not SHARED_DIR.is_dir():
        pytest.fail(f"shared reference folder not found at {SHARED_DIR}; set CDC_SHARED_DIR")
    return SHARED_DIR


@pytest.fixture(scope="session")
def seed_examples_dir(shared_dir: Path) -> Path:
    """``shared/fixtures/seed_examples``: the Debezium documentation's example events."""
    return shared_dir / "fixtures" / "seed_examples"


@pytest.fixture(scope="session")
def spark_lake_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Embedded lake directory used by the session's SparkSession."""
    return tmp_path_factory.mktemp("spark-lake")


@pytest.fixture(scope="session")
def spark(spark_lake_dir: Path) -> Iterator[SparkSession]:
    """One local[2] SparkSession for the whole run, UTC, with the project's jars and an embedded lake."""
    from cdclake.lake import LakeConfig
    from cdclake.spark import build_spark_session, local_driver_options

    session = build_spark_session(
        "cdclake-tests",
        lake=LakeConfig.embedded(spark_lake_dir),
        master="local[2]",
        driver_options=local_driver_options(jit="tiered"),  # it lives for the whole run: C2 pays back
        extra_conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    """The real local stack (``cdclake stack up``), one for the whole run.

    A stack that is already running (``cdclake stack up`` by hand, or without Airflow as the benchmarks start it) is
    reused and left running; otherwise the session starts it and stops it at the end (``CDC_KEEP_STACK=1`` leaves
    it running). Its Airflow components start only for the tests that use them (``stack_airflow`` in
    tests/integration/conftest.py): idle, they keep about a quarter of a core busy, which the other tests need.
    """
    from cdclake.stack import Stack, StackConfig

    # _isolate_environment points CDC_LAKE_DIR elsewhere; the stack itself lives in the normal state dir.
    local = Stack(StackConfig.from_env())
    already_running = all(local.services[name].process.running() for name in local.started_by_up(airflow=False))
    local.up(airflow=False)
    yield local
    if not already_running and not os.environ.get("CDC_KEEP_STACK"):
        local.down()
