"""
### iceberg_maintenance

Daily Iceberg maintenance of every lake table of every source of the deployment (`CDC_SOURCES`),
through Iceberg's Spark procedures (`jobs/maintenance.py`, one `spark-submit` for all specs; tables not
in the lake yet are skipped). Each source's tables are maintained under the source's lock, so no batch
of that source runs meanwhile.

Per table, the policy is `cdclake.lake.maintenance.policy_for(table lake options, params)`:

| step | default |
|---|---|
| `rewrite_data_files` (binpack) | groups of at least 5 files |
| `rewrite_position_delete_files` | on, except for `append` tables |
| `expire_snapshots` | older than 7 days, always keep the last 5 |
| `remove_orphan_files` | older than 3 days (Iceberg refuses under 1 day) |
| expire delete tombstones (`DELETE FROM <table>__cdc_deletes`) | recorded more than the spec's `tombstone_retention_days` ago (default 7; upsert tables) |

An upsert table's tombstone side table gets the same procedures after its expired tombstones are
deleted. The lake's audit tables (`lake.cdc_audit.*`: ledger, transactions, schema changes, dead letters,
quarantine; two to four small commits per batch) get them too, without position-delete compaction
(they are append-only), unless `skip_audit`. Params override the defaults for one run; `dry_run` only lists orphan files and counts
expired tombstones. A failing table does not stop the others; the task fails at the end when any
table failed. A Spark driver that runs out of memory stops the job at that table, and its log says which
setting to raise.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from cdclake.connectors import load_specs
from cdclake.orchestration import job_arguments, spec_names
from cdclake.orchestration.defaults import MAINTENANCE_TIMEOUT, START_DATE, default_args
from cdclake.orchestration.deployment import enabled_specs
from cdclake_airflow.operators.spark_job import CdcSparkJobOperator


@dag(
    schedule="0 3 * * *",
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=10),  # room for the retries of a timed-out job
    doc_md=__doc__,
    default_args=default_args(),
    tags=["iceberg", "maintenance"],
    params={
        "sources": Param([], type="array", items={"type": "string", "enum": spec_names(enabled_specs(load_specs()))}),
        "dry_run": Param(False, type="boolean"),
        "expire_older_than_days": Param(None, type=["null", "number"], minimum=0),
        "retain_last": Param(None, type=["null", "integer"], minimum=1),
        "orphan_older_than_days": Param(None, type=["null", "number"], minimum=1),
        "rewrite_min_input_files": Param(None, type=["null", "integer"], minimum=1),
        "tombstone_retention_days": Param(None, type=["null", "number"], minimum=0),
        "skip_audit": Param(False, type="boolean"),
    },
)
def iceberg_maintenance() -> None:
    @task
    def plan(params: dict[str, Any]) -> list[str]:
        names = params["sources"] or spec_names(enabled_specs(load_specs()))
        args = job_arguments(names[0], extra={k: params.get(k) for k in params if k != "sources"})
        return [*args, *(a for name in names[1:] for a in ("--spec", name))]

    CdcSparkJobOperator(
        task_id="maintain", job="maintenance", application_args=plan(), execution_timeout=MAINTENANCE_TIMEOUT
    )


iceberg_maintenance()
