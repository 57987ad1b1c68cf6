"""Pure helpers behind the Airflow DAGs (no Airflow import): spec selection, job arguments,
snapshot requests and checks, connector health.

The DAGs in ``dags/`` and the adapters in ``plugins/cdclake_airflow`` call these; everything here is
unit-testable without Airflow, Kafka or Spark.
"""

from __future__ import annotations

from cdclake.ingest.summary import IngestSummary, load_summary
from cdclake.orchestration.health import connector_health_problems, failed_connectors
from cdclake.orchestration.jobs import JOBS_DIR, job_application, job_arguments, run_file
from cdclake.orchestration.selection import select_specs, spec_names
from cdclake.orchestration.snapshot import (
    SnapshotRequest,
    comparable,
    count_mismatches,
    lake_row_count,
    reader_conn_id,
)

__all__ = [
    "JOBS_DIR",
    "IngestSummary",
    "SnapshotRequest",
    "comparable",
    "connector_health_problems",
    "failed_connectors",
    "count_mismatches",
    "job_application",
    "job_arguments",
    "lake_row_count",
    "load_summary",
    "reader_conn_id",
    "run_file",
    "select_specs",
    "spec_names",
]
