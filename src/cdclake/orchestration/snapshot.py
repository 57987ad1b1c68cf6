"""Ad hoc snapshots from the ``cdc_snapshot`` DAG: validating the request, counting rows on both sides."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from cdclake.connectors import ConnectorSpec, LakeMode

SnapshotType = Literal["incremental", "blocking"]
SNAPSHOT_TYPES: tuple[SnapshotType, ...] = ("incremental", "blocking")


def reader_conn_id(spec: ConnectorSpec) -> str:
    """Connection used to count source rows (the signal writer cannot SELECT): ``cdc_postgres_reader``."""
    return spec.reader_connection_id


class SnapshotRequest:
    """A validated ``cdc_snapshot`` request: which tables of which spec, which kind, which filter.

    Args:
        spec: the connector spec (from ``params.source``).
        tables: data collections (``inventory.customers``) or bare table names (``customers``)
            when they are unambiguous in the spec.
        snapshot_type: ``incremental`` or ``blocking``.
        filter: optional. Incremental: a WHERE condition applied to every table. Blocking: a full
            ``SELECT``, so only one table may be given. A SQL source's filter is parsed in its dialect for each
            table (:func:`cdclake.signals.filters.check_filter`, without the columns, which the signal hook
            checks when it can read them) and sent as regenerated; a MongoDB filter is sent as given.

    Raises:
        ValueError: on an empty or unknown table, an unknown type, or a blocking filter with several
            tables (the message names the spec's tables); a refused filter is a ``SignalValidationError``
            naming the table and why.
    """

    def __init__(
        self,
        spec: ConnectorSpec,
        tables: Sequence[str],
        snapshot_type: str = "incremental",
        filter: str | None = None,  # noqa: A002 - the Param is called filter
    ) -> None:
        kind = str(snapshot_type).lower()
        if kind not in SNAPSHOT_TYPES:
            raise ValueError(f"type must be one of {', '.join(SNAPSHOT_TYPES)}, got {snapshot_type!r}")
        if isinstance(tables, str) or not tables:
            raise ValueError(f"tables must be a non-empty list; the spec {spec.name} has {', '.join(spec.table_names)}")
        self.spec = spec
        self.snapshot_type: SnapshotType = kind  # type: ignore[assignment]
        self.data_collections = [self._resolve(spec, t) for t in tables]
        self.filter = filter.strip() if filter and filter.strip() else None
        if self.filter and kind == "blocking" and len(self.data_collections) > 1:
            raise ValueError("a blocking snapshot filter is a full SELECT; give exactly one table with it")
        self.filters = self._checked_filters()

    @staticmethod
    def _resolve(spec: ConnectorSpec, table: str) -> str:
        name = str(table).strip()
        if name in spec.table_names:
            return name
        matches = [t for t in spec.table_names if t.rsplit(".", 1)[-1] == name]
        if len(matches) == 1:
            return matches[0]
        raise ValueError(f"spec {spec.name} does not capture {table!r}; its tables are {', '.join(spec.table_names)}")

    def _checked_filters(self) -> dict[str, str]:
        """Data collection -> its filter as sent (empty without filter)."""
        if not self.filter:
            return {}
        from cdclake.signals.filters import check_filter, filter_dialect

        dialect = filter_dialect(self.spec.connector)
        if dialect is None:  # MongoDB: not SQL
            return dict.fromkeys(self.data_collections, self.filter)
        return {dc: check_filter(self.filter, dc, self.snapshot_type, dialect) for dc in self.data_collections}

    @property
    def additional_conditions(self) -> list[dict[str, str]]:
        """Debezium ``additional-conditions``: the filter for every requested table (empty without filter)."""
        return [{"data-collection": dc, "filter": text} for dc, text in self.filters.items()]

    def signal_fields(self) -> dict[str, Any]:
        """Arguments of ``SendDebeziumSignalOperator`` (and what the DAG logs)."""
        return {
            "spec": self.spec.name,
            "data_collections": list(self.data_collections),
            "snapshot_type": self.snapshot_type,
            "additional_conditions": self.additional_conditions,
        }


def comparable(spec: ConnectorSpec, data_collection: str) -> bool:
    """Whether lake and source row counts must match: only ``upsert`` tables hold one row per key."""
    return spec.table(data_collection).lake.mode is LakeMode.UPSERT


def count_mismatches(counts: Mapping[str, tuple[int, int]]) -> list[str]:
    """``table: source N rows, lake M rows`` for every table whose counts differ.

    Args:
        counts: table -> (source rows, lake rows).
    """
    return [
        f"{table}: source {source} row(s), lake {lake} row(s)"
        for table, (source, lake) in counts.items()
        if source != lake
    ]


def lake_row_count(identifier: str, lake: Any = None) -> int | None:
    """Rows of an Iceberg table through pyiceberg (position/equality deletes applied), None if it does not exist.

    Args:
        identifier: ``lake.<prefix>.<schema>.<table>`` (the catalog part is optional).
        lake: a :class:`cdclake.lake.LakeConfig`; default from the environment.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from cdclake.lake import LakeConfig
    from cdclake.lake.names import catalog_identifier

    config = lake or LakeConfig.from_env()
    catalog = load_catalog(**config.pyiceberg_properties())
    try:
        table = catalog.load_table(catalog_identifier(identifier))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    return int(table.scan().count())
