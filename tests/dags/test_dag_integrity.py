"""DAG integrity and team policy, one case per DAG (ids = the DAG's file), as in the Astronomer template."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from cdclake.assets import spec_table_assets
from cdclake.connectors import load_specs

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
SPECS = load_specs()
APPROVED_TAGS = {
    "cdc",
    "debezium",
    "kafka-connect",
    "snapshot",
    "ingest",
    "iceberg",
    "maintenance",
    "health",
    "reconcile",
} | {f"source:{name}" for name in SPECS}
DAG_FILES = sorted(p for p in DAGS_DIR.glob("*.py") if not p.name.startswith("_"))
EXPECTED_DAG_IDS = {
    "cdc_connectors",
    "cdc_connectors_health",
    "cdc_snapshot",
    "cdc_reconcile",
    "iceberg_maintenance",
    *(f"cdc_ingest__{name}" for name in SPECS),
}


def _dags(bag: Any) -> list[Any]:
    return [bag.dags[dag_id] for dag_id in sorted(bag.dags)]


def _dag_cases() -> list[Any]:
    return sorted(EXPECTED_DAG_IDS)


def test_no_import_errors(dag_bag: Any) -> None:
    errors = {Path(path).name: trace.strip().splitlines()[-1] for path, trace in dag_bag.import_errors.items()}
    assert errors == {}


def test_the_expected_dags_are_defined(dag_bag: Any) -> None:
    assert set(dag_bag.dags) == EXPECTED_DAG_IDS


@pytest.mark.parametrize("dag_id", _dag_cases())
def test_dag_policy(dag_bag: Any, dag_id: str) -> None:
    dag = dag_bag.dags[dag_id]
    stem = Path(dag.fileloc).stem
    assert dag_id == stem or dag_id.startswith(f"{stem}__"), f"{dag_id} is not defined in {stem}.py"
    assert dag.tags, f"{dag_id} has no tags"
    assert set(dag.tags) <= APPROVED_TAGS, f"{dag_id}: unapproved tags {set(dag.tags) - APPROVED_TAGS}"
    assert dag.default_args.get("owner") not in (None, "", "airflow"), f"{dag_id} needs an owner"
    assert dag.default_args.get("retries", 0) >= 2, f"{dag_id} needs retries >= 2"
    assert dag.catchup is False
    assert dag.doc_md and dag.doc_md.strip(), f"{dag_id} needs doc_md=__doc__"
    dag.check_cycle()  # raises AirflowDagCycleException


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_dag_files_set_catchup_and_doc_explicitly(path: Path) -> None:
    keywords = {
        kw.arg: kw.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        for kw in node.keywords
    }
    assert isinstance(keywords.get("catchup"), ast.Constant) and keywords["catchup"].value is False
    assert isinstance(keywords.get("doc_md"), ast.Name) and keywords["doc_md"].id == "__doc__"


def _validated(dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    import copy

    params = copy.deepcopy(dag.params)
    for key, value in conf.items():
        params[key] = value
    return params.validate()


def test_snapshot_params_accept_a_valid_request(dag_bag: Any) -> None:
    resolved = _validated(
        dag_bag.dags["cdc_snapshot"], {"source": "postgres", "tables": ["inventory.customers"], "type": "incremental"}
    )
    assert resolved == {
        "source": "postgres",
        "tables": ["inventory.customers"],
        "type": "incremental",
        "filter": None,
        "verify": True,
    }


@pytest.mark.parametrize(
    "conf",
    [
        {"source": "postgres", "tables": ["inventory.customers"], "type": "full"},  # bad type
        {"source": "oracle", "tables": ["inventory.customers"]},  # not a spec
        {"source": "postgres", "tables": []},  # no table
        {"source": "postgres", "tables": "inventory.customers"},  # not a list
        {"source": "postgres", "tables": ["inventory.customers"], "filter": 3},  # filter not a string
    ],
    ids=["bad-type", "unknown-source", "no-tables", "tables-not-list", "filter-not-string"],
)
def test_snapshot_params_reject_bad_requests(dag_bag: Any, conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        _validated(dag_bag.dags["cdc_snapshot"], conf)


def test_snapshot_params_are_required(dag_bag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError):
        _validated(dag_bag.dags["cdc_snapshot"], {})


@pytest.mark.parametrize("name", sorted(SPECS))
def test_ingest_dag_runs_the_job_and_declares_the_table_assets(dag_bag: Any, name: str) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = dag_bag.dags[f"cdc_ingest__{name}"]
    assert dag.max_active_runs == 1
    assert dag.schedule is not None
    ingest = dag.get_task("ingest")
    assert isinstance(ingest, SparkSubmitOperator)
    assert ingest._conn_id == "spark_default"
    assert ingest.job == "ingest"
    assert ingest.application_args == ["--spec", name]
    outlets = {
        asset.name: asset.uri for task in dag.tasks if task.task_id.startswith("publish.") for asset in task.outlets
    }
    assert outlets == {ref.name: ref.uri for ref in spec_table_assets(SPECS[name])}
    for task in dag.tasks:
        if task.task_id.startswith("publish."):
            assert task.upstream_task_ids == {"check_batch"}
            assert len(task.outlets) == 1
    # dead letters flag the run beside the publish tasks: its failure never holds back an Asset event
    dead_letters = dag.get_task("dead_letters")
    assert dead_letters.upstream_task_ids == {"check_batch"}
    assert dead_letters.downstream_task_ids == set() and not dead_letters.outlets


def test_connectors_dag_maps_upsert_restart_and_wait(dag_bag: Any) -> None:
    dag = dag_bag.dags["cdc_connectors"]
    assert dag.get_task("upsert_connector").upstream_task_ids == {"validate_specs"}
    assert dag.get_task("restart_failed_tasks").upstream_task_ids == {"upsert_connector"}
    assert dag.get_task("wait_running").upstream_task_ids == {"upsert_connector", "restart_failed_tasks"}
    wait = dag.get_task("wait_running")
    assert wait.operator_class.__name__ == "KafkaConnectorRunningSensor"
    assert wait.partial_kwargs.get("deferrable", True) is True
