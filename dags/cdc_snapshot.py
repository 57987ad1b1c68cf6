"""
### cdc_snapshot

Ad hoc Debezium snapshot of some tables of one source, verified in the lake.

Params (JSON-schema validated):

| param | meaning |
|---|---|
| `source` | connector spec name (`postgres`, `mariadb`, ...) |
| `tables` | data collections (`inventory.customers`) or unambiguous bare names (`customers`) |
| `type` | `incremental` (default; chunked, runs beside streaming) or `blocking` |
| `filter` | optional: a WHERE condition over the tables' columns (incremental) or `SELECT * FROM <table> WHERE ...` (blocking, one table); no subquery, other table or unlisted function (docs/connectors.md) |
| `verify` | run one ingest batch and compare source and lake row counts (default true) |

1. **plan**: checks the tables belong to the spec, parses the filter in the source's SQL dialect and builds
   the signal's fields.
2. **send_signal**: inserts an `execute-snapshot` signal into the spec's signal table.
3. **wait_snapshot** (deferrable): waits for the snapshot's COMPLETED notification on
   `<prefix>.notifications`; fails on ABORTED.
4. **ingest**: one bounded batch of `jobs/ingest.py` for the source.
   It holds the source's lock, so it waits for a scheduled `cdc_ingest__<source>` batch in flight.
5. **compare_row_counts**: source `COUNT(*)` (via the reader connection `<connection_id>_reader`;
   skipped with a warning when it is not defined) must equal the lake table's row count for `upsert` tables.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from cdclake.connectors import load_specs
from cdclake.orchestration import spec_names
from cdclake.orchestration.defaults import INGEST_BATCH_TIMEOUT, START_DATE, default_args
from cdclake.orchestration.deployment import enabled_specs
from cdclake_airflow.callables import compare_snapshot_counts, plan_snapshot
from cdclake_airflow.operators.debezium_signal import SendDebeziumSignalOperator
from cdclake_airflow.operators.spark_job import CdcSparkJobOperator
from cdclake_airflow.sensors.debezium import SnapshotCompletedSensor

SIGNAL = "ti.xcom_pull(task_ids='send_signal')"


@dag(
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    dagrun_timeout=timedelta(hours=3),
    doc_md=__doc__,
    default_args=default_args(),
    tags=["cdc", "debezium", "snapshot"],
    params={
        "source": Param(type="string", enum=spec_names(enabled_specs(load_specs())), description="Source (spec name)."),
        "tables": Param(
            type="array", items={"type": "string", "minLength": 1}, minItems=1, description="Tables to snapshot."
        ),
        "type": Param("incremental", type="string", enum=["incremental", "blocking"]),
        "filter": Param(
            None,
            type=["null", "string"],
            description="WHERE condition, or SELECT * FROM <table> WHERE ... for blocking.",
        ),
        "verify": Param(True, type="boolean", description="Ingest one batch and compare row counts."),
    },
)
def cdc_snapshot() -> None:
    @task(multiple_outputs=True)
    def plan(params: dict[str, Any]) -> dict[str, Any]:
        return plan_snapshot(params)

    @task.short_circuit
    def verify_requested(params: dict[str, Any]) -> bool:
        return bool(params["verify"])

    @task(execution_timeout=timedelta(minutes=15))
    def compare_row_counts(
        data_collections: list[str], ingest_result: dict[str, Any], params: dict[str, Any]
    ) -> dict[str, Any]:
        return compare_snapshot_counts(params["source"], data_collections, ingest_result)

    request = plan()
    send = SendDebeziumSignalOperator(
        task_id="send_signal",
        spec="{{ params.source }}",
        data_collections=request["data_collections"],
        snapshot_type=request["snapshot_type"],
        additional_conditions=request["additional_conditions"],
    )
    wait = SnapshotCompletedSensor(
        task_id="wait_snapshot",
        spec="{{ params.source }}",
        signal_id=f"{{{{ {SIGNAL}['signal_id'] }}}}",
        blocking_since_ms=f"{{{{ {SIGNAL}['sent_at_ms'] if params.type == 'blocking' else '' }}}}",
        poll_interval=2,
        timeout=3600,
    )
    ingest = CdcSparkJobOperator(
        task_id="ingest",
        job="ingest",
        application_args=["--spec", "{{ params.source }}"],
        execution_timeout=INGEST_BATCH_TIMEOUT,
    )
    send >> wait >> verify_requested() >> ingest
    compare_row_counts(request["data_collections"], ingest.output)


cdc_snapshot()
