"""What a deployment schedules: only its sources (CDC_SOURCES) get ingest DAGs, at its interval (CDC_INGEST_INTERVAL)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cdclake.connectors import load_specs
from cdclake.exceptions import ConfigError
from cdclake.orchestration.deployment import enabled_specs, ingest_interval, spark_pool
from cdclake.settings import Settings

SPECS = load_specs()
DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


def test_enabled_specs_default_to_every_spec_and_follow_cdc_sources() -> None:
    assert [s.name for s in enabled_specs(SPECS, Settings.from_env({}))] == sorted(SPECS)
    sources = Settings.from_env({"CDC_SOURCES": " postgres, mariadb ,"})
    assert [s.name for s in enabled_specs(SPECS, sources)] == ["mariadb", "postgres"]
    with pytest.raises(ConfigError, match=r"CDC_SOURCES='postgres,oracle' names unknown spec\(s\) oracle"):
        enabled_specs(SPECS, Settings.from_env({"CDC_SOURCES": "postgres,oracle"}))


@pytest.mark.parametrize(
    ("value", "interval"),
    [
        ("", timedelta(minutes=5)),
        ("90s", timedelta(seconds=90)),
        ("1m", timedelta(minutes=1)),
        ("2h", timedelta(hours=2)),
        ("300", timedelta(minutes=5)),
        ("0.5m", timedelta(seconds=30)),
    ],
)
def test_ingest_interval(value: str, interval: timedelta) -> None:
    assert ingest_interval(Settings.from_env({"CDC_INGEST_INTERVAL": value})) == interval


@pytest.mark.parametrize("value", ["soon", "5 minutes", "5s", "-1m"])
def test_a_bad_ingest_interval_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="CDC_INGEST_INTERVAL"):
        ingest_interval(Settings.from_env({"CDC_INGEST_INTERVAL": value}))


def test_the_spark_pool_defaults_to_airflows_default_pool() -> None:
    assert spark_pool(Settings.from_env({})) == spark_pool(Settings.from_env({"CDC_SPARK_POOL": " "})) == "default_pool"
    assert spark_pool(Settings.from_env({"CDC_SPARK_POOL": "cdc_spark"})) == "cdc_spark"


def _bag(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return DagBag(dag_folder=str(DAGS_DIR))


def test_only_the_deployments_sources_get_ingest_dags(monkeypatch: pytest.MonkeyPatch) -> None:
    bag = _bag(monkeypatch, CDC_SOURCES="postgres,mariadb", CDC_INGEST_INTERVAL="1m")
    assert not bag.import_errors
    ingest = sorted(d for d in bag.dags if d.startswith("cdc_ingest__"))
    assert ingest == ["cdc_ingest__mariadb", "cdc_ingest__postgres"]
    dag = bag.dags["cdc_ingest__postgres"]
    assert dag.schedule == timedelta(minutes=1)
    # the Params offer only the deployment's sources
    assert bag.dags["cdc_snapshot"].params.get_param("source").schema["enum"] == ["mariadb", "postgres"]
    # a run starts with the cheap check; Spark only runs when it finds work
    assert dag.get_task("pending").downstream_task_ids == {"ingest"}


def test_followed_sources_get_a_continuous_follower_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    from cdclake.orchestration.defaults import INGEST_BATCH_TIMEOUT

    bag = _bag(monkeypatch, CDC_SOURCES="postgres,mariadb", CDC_FOLLOW_SOURCES="postgres", CDC_FOLLOW_RUN_FOR="20m")
    assert not bag.import_errors
    assert sorted(d for d in bag.dags if d.startswith("cdc_follow__")) == ["cdc_follow__postgres"]
    dag = bag.dags["cdc_follow__postgres"]
    assert type(dag.timetable).__name__ == "ContinuousTimetable" and dag.max_active_runs == 1 and not dag.catchup
    follow = dag.get_task("follow")
    args = follow.application_args
    assert args[:2] == ["--spec", "postgres"] and "--follow" in args
    assert args[args.index("--run-for") + 1] == "1200"
    # a standing job stays out of the Spark pool of the scheduled batches
    assert follow.pool == "default_pool"
    assert follow.execution_timeout == timedelta(minutes=20) + INGEST_BATCH_TIMEOUT <= dag.dagrun_timeout
    assert follow.downstream_task_ids == {"check_batch"}
    publish = {t.task_id for t in dag.tasks if t.task_id.startswith("publish.")}
    assert publish == {t.task_id for t in bag.dags["cdc_ingest__postgres"].tasks if t.task_id.startswith("publish.")}
    assert {a.name for t in dag.tasks for a in t.outlets} == {
        a.name for t in bag.dags["cdc_ingest__postgres"].tasks for a in t.outlets
    }


def test_no_follower_dag_by_default_and_a_source_outside_the_deployment_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cdclake.orchestration.deployment import followed_specs

    assert followed_specs(SPECS, Settings.from_env({})) == []
    with pytest.raises(ConfigError, match=r"CDC_FOLLOW_SOURCES='mongodb' names source\(s\) mongodb the deployment"):
        followed_specs(SPECS, Settings.from_env({"CDC_SOURCES": "postgres", "CDC_FOLLOW_SOURCES": "mongodb"}))
