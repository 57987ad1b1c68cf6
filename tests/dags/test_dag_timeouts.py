"""Timeout policy, one case per DAG: every DAG has a ``dagrun_timeout``, every task an ``execution_timeout``
that fits in it (a sensor's wait too), and in the manual and daily DAGs a task's retries fit in it as well."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cdclake.connectors import load_specs

INGEST_DAG_IDS = {f"cdc_ingest__{name}" for name in load_specs()}
DAG_IDS = {
    "cdc_connectors",
    "cdc_connectors_health",
    "cdc_snapshot",
    "cdc_reconcile",
    "iceberg_maintenance",
} | INGEST_DAG_IDS
#: DAGs scheduled every few minutes: the next run, not the retries of a timed-out task, does the work again.
FREQUENT_DAG_IDS = {"cdc_connectors_health"} | INGEST_DAG_IDS


def _kwarg(task: Any, name: str) -> Any:
    """An operator argument, read from ``partial()`` for a mapped task."""
    partial_kwargs = getattr(task, "partial_kwargs", None)
    return partial_kwargs.get(name) if partial_kwargs is not None else getattr(task, name, None)


def _sensor_wait(task: Any) -> timedelta | None:
    """How long a sensor waits (its ``timeout``); None for other tasks."""
    if not any(cls.__name__ == "BaseSensorOperator" for cls in task.operator_class.__mro__):
        return None
    value = _kwarg(task, "timeout")
    return value if isinstance(value, timedelta) else timedelta(seconds=float(value))


def _retry_delays(task: Any) -> timedelta:
    """The longest total wait between a task's attempts (Airflow's exponential backoff waits up to twice its
    ``retry_delay * 2 ** (try - 1)``, at most ``max_retry_delay``)."""
    delay = task.retry_delay
    if not task.retry_exponential_backoff:
        return delay * task.retries
    longest = task.max_retry_delay or timedelta.max
    return sum((min(longest, 2 * delay * 2**attempt) for attempt in range(task.retries)), timedelta())


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_every_task_has_an_execution_timeout_within_the_dagrun_timeout(dag_bag: Any, dag_id: str) -> None:
    dag = dag_bag.dags[dag_id]
    assert isinstance(dag.dagrun_timeout, timedelta), f"{dag_id} needs a dagrun_timeout"
    for task in dag.tasks:
        timeout = task.execution_timeout
        assert isinstance(timeout, timedelta), f"{dag_id}.{task.task_id} needs an execution_timeout"
        assert timedelta(0) < timeout <= dag.dagrun_timeout, (
            f"{dag_id}.{task.task_id}: execution_timeout {timeout} exceeds dagrun_timeout {dag.dagrun_timeout}"
        )
        wait = _sensor_wait(task)
        if wait is not None:
            assert wait <= dag.dagrun_timeout, (
                f"{dag_id}.{task.task_id}: sensor timeout {wait} exceeds dagrun_timeout {dag.dagrun_timeout}"
            )


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS - FREQUENT_DAG_IDS))
def test_a_tasks_retries_fit_in_the_dagrun_timeout(dag_bag: Any, dag_id: str) -> None:
    dag = dag_bag.dags[dag_id]
    for task in dag.tasks:
        attempts = task.execution_timeout * (task.retries + 1) + _retry_delays(task)
        assert attempts <= dag.dagrun_timeout, (
            f"{dag_id}.{task.task_id}: {task.retries + 1} attempts of {task.execution_timeout} take up to "
            f"{attempts}, more than dagrun_timeout {dag.dagrun_timeout}"
        )


def test_a_timed_out_health_check_is_retried_within_the_run(dag_bag: Any) -> None:
    dag = dag_bag.dags["cdc_connectors_health"]
    (task,) = dag.tasks
    assert 2 * task.execution_timeout + task.retry_delay <= dag.dagrun_timeout < dag.timetable.delta
