"""The source database as the connector sees it, from the spec's Airflow connection."""

from __future__ import annotations

from airflow.sdk import BaseHook

from cdclake.connectors import DatabaseEndpoint


def get_database_endpoint(conn_id: str) -> DatabaseEndpoint:
    """Build the :class:`DatabaseEndpoint` of an Airflow database connection.

    ``host``/``port`` come from the connection, the database name from its ``schema`` field, and
    string extras become connection options (used for MongoDB connection-string parameters).
    Credentials are never read here: Connect gets a config-provider reference from the spec.

    Raises:
        ValueError: when the connection has no host.
    """
    conn = BaseHook.get_connection(conn_id)
    if not conn.host:
        raise ValueError(f"connection {conn_id!r}: 'host' must be provided")
    options = {str(k): str(v) for k, v in conn.extra_dejson.items() if isinstance(v, str | int | bool)}
    return DatabaseEndpoint(host=conn.host, port=conn.port, database=conn.schema or None, options=options)
