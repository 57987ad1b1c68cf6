"""Names and URIs of the Airflow Assets cdclake publishes: one per Iceberg table, defined once.

Pure strings and functions (no Airflow import). ``cdclake_airflow.assets`` builds the
``airflow.sdk.Asset`` objects from :func:`iceberg_table_asset`, so producers (``outlets=``) and
consumers (``schedule=``) always agree on the identity ``(name, uri)``.

Naming:

* Iceberg identifier (Spark, with catalog): ``lake.<topic_prefix>.<schema-or-db>.<table>``
  (:func:`table_identifier`); the namespace has two levels, ``<topic_prefix>.<schema-or-db>``.
  For Informix the owner takes the place of the schema, as in the topic name.
* Asset name: the identifier (``lake.pg.inventory.customers``).
* Asset URI: ``iceberg://lake/<topic_prefix>.<schema-or-db>/<table>``.
* Asset group: ``iceberg``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cdclake.connectors import ConnectorKind, ConnectorSpec
from cdclake.lake.catalog import CATALOG_NAME

ASSET_URI_SCHEME = "iceberg"
ASSET_GROUP = "iceberg"
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


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


def _part(name: str) -> str:
    return _UNSAFE.sub("_", name)


def table_identifier(spec: ConnectorSpec, data_collection: str) -> str:
    """Iceberg identifier (with catalog) of a captured table: ``lake.<prefix>.<schema-or-db>.<table>``.

    The same rule as the ingestion job (:mod:`cdclake.ingest.naming`): the topic prefix, the schema
    (or database; the owner for Informix, whose database is dropped as in its topic names) and the
    table, each with characters outside ``[A-Za-z0-9_]`` replaced by ``_``.

    Raises:
        KeyError: when the spec does not capture ``data_collection``.
    """
    spec.table(data_collection)  # raises KeyError naming the spec's tables
    parts = data_collection.split(".")
    if spec.connector is ConnectorKind.INFORMIX and len(parts) == 3:
        parts = parts[1:]
    return ".".join((CATALOG_NAME, _part(spec.topic_prefix), *(_part(p) for p in parts)))


def catalog_identifier(identifier: str) -> str:
    """The identifier without the catalog (what pyiceberg's ``load_table`` and Iceberg procedures take)."""
    prefix = f"{CATALOG_NAME}."
    return identifier[len(prefix) :] if identifier.startswith(prefix) else identifier


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
    identifier = table_identifier(spec, data_collection)
    return AssetRef(
        name=identifier,
        uri=asset_uri(identifier),
        extra={"source": spec.name, "data_collection": data_collection, "topic": spec.topic_for(data_collection)},
    )


def spec_table_assets(spec: ConnectorSpec) -> list[AssetRef]:
    """The Assets of every captured table of a spec, in spec order (the signal table is not a lake table)."""
    return [iceberg_table_asset(spec, name) for name in spec.table_names]
