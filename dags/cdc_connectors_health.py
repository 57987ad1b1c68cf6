"""
### cdc_connectors_health

Every 10 minutes: asks Kafka Connect for the status of the connector of every active spec (specs
whose source connection is defined) and **fails** when a connector or one of its tasks is FAILED,
or a connector is not registered. It is skipped when no spec has its connection defined. The failure message quotes the worker's stack trace, so the
alert (task failure notification) says what broke. Non-RUNNING states (PAUSED, UNASSIGNED) are
logged as warnings.

Fix: look at the trace, fix the cause, then run `cdc_connectors` (it restarts failed tasks).
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
