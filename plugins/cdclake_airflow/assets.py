"""Airflow Asset objects for the lake's Iceberg tables, built from :mod:`cdclake.assets` (defined once there)."""

from __future__ import annotations

from airflow.sdk import Asset

from cdclake.assets import AssetRef, iceberg_table_asset, spec_table_assets
from cdclake.connectors import ConnectorSpec


def to_asset(ref: AssetRef) -> Asset:
    """The ``airflow.sdk.Asset`` of an :class:`AssetRef`."""
    return Asset(name=ref.name, uri=ref.uri, group=ref.group, extra=dict(ref.extra))


def table_asset(spec: ConnectorSpec, data_collection: str) -> Asset:
    """The Asset of one captured table (``lake.<prefix>.<schema>.<table>``)."""
    return to_asset(iceberg_table_asset(spec, data_collection))


def spec_assets(spec: ConnectorSpec) -> dict[str, Asset]:
    """Data collection -> Asset, for every captured table of a spec."""
    return {ref.extra["data_collection"]: to_asset(ref) for ref in spec_table_assets(spec)}
