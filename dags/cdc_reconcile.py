"""
### cdc_reconcile

Compares each source database with the lake, table by table: row counts, order-independent checksums of
every row, and the keys that are missing, extra or different ([docs/reconcile.md](docs/reconcile.md)).
The verdicts are recorded in `lake.cdc_audit.reconciliation`, which the CDC view shows.

Manual: compare when the sources are quiet, since changes still in flight show as differences.
`cdclake demo` runs it once the lake has caught up.

1. **plan**: the sources to compare (the `sources` param, default every source of the deployment).
2. **reconcile** (mapped per source): reads the source through its reader connection
   (`<connection_id>_reader`: `SELECT` on the captured tables only) and the lake through pyiceberg,
   holding the source's lock so that no batch commits meanwhile. Records the verdicts, then **fails**
   when a table differs, naming the tables and sample keys. Skipped for MongoDB and for a source whose
   reader connection is not defined.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from cdclake.connectors import load_specs
from cdclake.orchestration import spec_names
from cdclake.orchestration.defaults import RECONCILE_TIMEOUT, START_DATE, default_args
from cdclake.orchestration.deployment import enabled_specs
from cdclake_airflow.callables import reconcile_under_lock

SOURCES = spec_names(enabled_specs(load_specs()))


@dag(
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=2),  # room for the retries of a timed-out reconcile
    doc_md=__doc__,
    default_args=default_args(),
    tags=["cdc", "reconcile", "iceberg"],
    params={
        "sources": Param([], type="array", items={"type": "string", "enum": SOURCES}, description="Empty: all."),
        "tables": Param([], type="array", items={"type": "string"}, description="Empty: every captured table."),
    },
)
def cdc_reconcile() -> None:
    @task
    def plan(params: dict[str, Any]) -> list[str]:
        return list(params["sources"] or SOURCES)

    @task(execution_timeout=RECONCILE_TIMEOUT)
    def reconcile(source: str, params: dict[str, Any], **context: Any) -> dict[str, Any]:
        ti = context["ti"]
        return reconcile_under_lock(source, params["tables"], f"airflow {ti.dag_id}/{ti.run_id}")

    reconcile.expand(source=plan())


cdc_reconcile()
