"""Names and URIs of the Airflow Assets cdclake publishes: one per Iceberg table, defined once.

Pure strings and functions (no Airflow import). ``cdclake_airflow.assets`` builds the
``airflow.sdk.Asset`` objects from :func:`iceberg_table_asset`, so producers (``outlets=``) and
consumers (``schedule=``) always agree on the identity ``(name, uri)``.

Naming:

* Asset name: the table's Iceberg identifier with catalog (``lake.pg.inventory.customers``, see
  :mod:`cdclake.lake.names`).
* Asset URI: ``iceberg://lake/<topic_prefix>.<schema-or-db>/<table>``.
* Asset group: ``iceberg``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdclake.lake.catalog import CATALOG_NAME
from cdclake.lake.names import catalog_identifier, spec_table_identifier

if TYPE_CHECKING:
    from cdclake.connectors import ConnectorSpec

ASSET_URI_SCHEME = "iceberg"
ASSET_GROUP = "iceberg"


@dataclass(frozen=True)
class AssetRef:
    """What an Airflow Asset for one Iceberg table is made of.

    Attributes:
        name: the Asset name (the Iceberg identifier, with catalog).
        uri: the Asset URI.
        group: the Asset group.
        extra: static metadata (source spec, data collection, topic).
    """

    name: str
    uri: str
    group: str = ASSET_GROUP
    extra: dict[str, str] = field(default_factory=dict)


def asset_uri(identifier: str) -> str:
    """``iceberg://lake/<namespace>/<table>`` for an identifier such as ``lake.pg.inventory.customers``.

    Raises:
        ValueError: when the identifier has no namespace.
    """
    parts = catalog_identifier(identifier).split(".")
    if len(parts) < 2:
        raise ValueError(f"{identifier!r} is not a namespaced Iceberg identifier (<namespace>.<table>)")
    return f"{ASSET_URI_SCHEME}://{CATALOG_NAME}/{'.'.join(parts[:-1])}/{parts[-1]}"


def iceberg_table_asset(spec: ConnectorSpec, data_collection: str) -> AssetRef:
    """The Asset of one captured table of a spec.

    Raises:
        KeyError: when the spec does not capture ``data_collection``.
    """
    identifier = spec_table_identifier(spec, data_collection)
    return AssetRef(
        name=identifier,
        uri=asset_uri(identifier),
        extra={"source": spec.name, "data_collection": data_collection, "topic": spec.topic_for(data_collection)},
    )


def spec_table_assets(spec: ConnectorSpec) -> list[AssetRef]:
    """The Assets of every captured table of a spec, in spec order (the signal table is not a lake table)."""
    return [iceberg_table_asset(spec, name) for name in spec.table_names]
