"""Connection lookups that only happen at task run time (never at DAG parse time)."""

from __future__ import annotations

from airflow.sdk import BaseHook

try:  # Airflow 3: the SDK's error; older cores raise AirflowNotFoundException
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef]


def connection_defined(conn_id: str) -> bool:
    """Whether the connection exists (env var ``AIRFLOW_CONN_<ID>``, secrets backend or metadata DB)."""
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return False
    return True
