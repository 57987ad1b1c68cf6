"""
### cdc_connectors_health

Every 10 minutes: asks Kafka Connect for the status of the connector of every active spec (specs
whose source connection is defined). A connector that is FAILED, or has a FAILED task, gets its failed
tasks restarted and is watched for up to 90 s, and the run **fails** (no retry), quoting the worker's
stack trace, so the alert (task failure notification) says what broke: FAILED again, with the new trace;
RUNNING for 15 s, saying it was restarted. A restart into a lasting fault runs while Debezium retries
(`errors_max_retries`, about five minutes by default) before it fails again, so only a run that finds
nothing FAILED is green. A connector that is not registered fails the run too. It is skipped when no
spec has its connection defined. Non-RUNNING states (PAUSED, UNASSIGNED) are logged as warnings.

Fix: look at the trace and fix the cause (a revoked grant, a dropped slot, ...); the next run restarts
the connector and reports it, the one after is green (or trigger this DAG, or `cdc_connectors`, which
also restarts failed tasks).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import dag, task

from cdclake.orchestration.defaults import START_DATE, default_args
from cdclake_airflow.callables import check_connectors_health

KAFKA_CONNECT_CONN_ID = "kafka_connect_default"


@dag(
    schedule=timedelta(minutes=10),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=9),
    doc_md=__doc__,
    # a retry after a timed-out check still ends within the 9-minute run
    default_args=default_args(
        retry_delay=timedelta(seconds=20), retry_exponential_backoff=False, execution_timeout=timedelta(minutes=4)
    ),
    tags=["cdc", "health", "kafka-connect"],
)
def cdc_connectors_health() -> None:
    @task
    def check_connectors() -> dict[str, str]:
        return check_connectors_health(None, KAFKA_CONNECT_CONN_ID)

    check_connectors()


cdc_connectors_health()
