"""
### cdc_connectors

Registers one Debezium connector per connector spec (`include/connectors/*.yaml`) on Kafka Connect.

1. **validate_specs**: loads every spec (a broken file fails here, naming file and key), keeps the
   ones whose source connection is defined in this deployment (or the `sources` param), and checks
   Connect has their plugins.
2. **upsert_connector** (mapped per spec): validates the generated config with Connect, then
   creates or updates the connector (`PUT /connectors/{name}/config`, idempotent).
3. **restart_failed_tasks** (mapped): restarts FAILED connector instances and tasks only (a no-op
   when nothing failed), so a config fix takes effect.
4. **wait_running** (mapped, deferrable): waits until the connector and every task are RUNNING;
   fails fast with the worker's stack trace when one is FAILED.

Manual; run it after changing a spec. `cdc_connectors_health` watches the connectors afterwards.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from cdclake.connectors import load_specs
from cdclake.orchestration import spec_names
from cdclake.orchestration.defaults import START_DATE, default_args
from cdclake.orchestration.deployment import enabled_specs
from cdclake_airflow.callables import validate_connector_specs
from cdclake_airflow.operators.kafka_connect import KafkaConnectorRestartOperator, KafkaConnectorUpsertOperator
from cdclake_airflow.sensors.kafka_connect import KafkaConnectorRunningSensor

KAFKA_CONNECT_CONN_ID = "kafka_connect_default"


def connector_of(upsert_result: dict[str, Any]) -> str:
    """The connector name from an upsert task's XCom."""
    return upsert_result["connector"]


@dag(
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=1),
    doc_md=__doc__,
    default_args=default_args(),
    tags=["cdc", "debezium", "kafka-connect"],
    params={
        "sources": Param(
            [],
            type="array",
            items={"type": "string", "enum": spec_names(enabled_specs(load_specs()))},
            description="Specs to register; empty = every spec whose source connection is defined.",
        ),
    },
)
def cdc_connectors() -> None:
    @task
    def validate_specs(params: dict[str, Any]) -> list[str]:
        return validate_connector_specs(params.get("sources"), KAFKA_CONNECT_CONN_ID)

    upserted = KafkaConnectorUpsertOperator.partial(
        task_id="upsert_connector", kafka_connect_conn_id=KAFKA_CONNECT_CONN_ID
    ).expand(spec=validate_specs())
    connectors = upserted.output.map(connector_of)
    restarted = KafkaConnectorRestartOperator.partial(
        task_id="restart_failed_tasks", kafka_connect_conn_id=KAFKA_CONNECT_CONN_ID
    ).expand(connector_name=connectors)
    # the wait is deferred and bounded by `timeout`; execution_timeout (default_args) bounds its worker steps
    running = KafkaConnectorRunningSensor.partial(
        task_id="wait_running", kafka_connect_conn_id=KAFKA_CONNECT_CONN_ID, poll_interval=3, timeout=600
    ).expand(connector_name=connectors)
    restarted >> running


cdc_connectors()
