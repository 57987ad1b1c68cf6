"""The tasks that read an ingest job's summary, shared by the scheduled (``cdc_ingest__<source>``) and the
continuous (``cdc_follow__<source>``) DAGs: ``check_batch``, ``dead_letters`` and one ``publish.<table>`` per
captured table. A follower's run summary has the fields of a batch summary, summed over its batches
(:class:`cdclake.ingest.follow.FollowReport`), so both DAGs check and publish it the same way."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, TaskGroup, task

from cdclake.connectors import ConnectorSpec
from cdclake_airflow.assets import spec_assets
from cdclake_airflow.callables import check_dead_letters, check_ingest_result, publish_table_change


def ingest_connections(spec: ConnectorSpec) -> tuple[str, ...]:
    """The Airflow connections the ingest job of ``spec`` is handed (``CdcSparkJobOperator(connections=...)``): a
    schemas-off source's job reads column types from the source database through the spec's reader connection."""
    return () if spec.converters.value_schemas_enable else (spec.reader_connection_id,)


def publish_task(data_collection: str, asset: Asset) -> Any:
    """The task emitting ``asset``'s event when the run changed the table (declared as its outlet)."""

    @task(task_id=data_collection.replace(".", "__"), outlets=[asset])
    def publish(summary: dict[str, Any], **context: Any) -> dict[str, Any]:
        return publish_table_change(summary, asset, context["outlet_events"])

    return publish


def summary_tasks(spec: ConnectorSpec, job_output: Any) -> None:
    """Add, in the DAG being defined, the tasks after the ingest job whose XCom is ``job_output``."""

    @task
    def check_batch(result: dict[str, Any]) -> dict[str, Any]:
        return check_ingest_result(result)

    @task
    def dead_letters(summary: dict[str, Any]) -> dict[str, dict[str, int]]:
        return check_dead_letters(summary)

    summary = check_batch(job_output)
    dead_letters(summary)
    with TaskGroup("publish"):
        for data_collection, asset in spec_assets(spec).items():
            publish_task(data_collection, asset)(summary)
