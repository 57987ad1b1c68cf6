"""How far a source's ingestion has got: the committed offsets in the lake's batch ledger."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from cdclake.ingest.offsets import TopicPartition
from cdclake.lake.catalog import LakeConfig


def committed_offsets(source: str, lake: LakeConfig | None = None) -> dict[TopicPartition, int]:
    """Next offset to ingest per topic-partition, from the last committed batch of ``source`` (pyiceberg; no Spark).

    Returns an empty mapping when nothing was ingested yet.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog = load_catalog(**(lake or LakeConfig.from_env()).pyiceberg_properties())
    try:
        table = catalog.load_table(("cdc_audit", "batches"))
    except NoSuchTableError:
        return {}
    safe = source.replace("'", "")
    rows = table.scan(
        row_filter=f"source == '{safe}' and status == 'committed'", selected_fields=("seq", "next_offsets")
    )
    last = max(rows.to_arrow().to_pylist(), key=lambda r: r["seq"], default=None)
    if last is None or not last["next_offsets"]:
        return {}
    return {(t, int(p)): int(v) for t, parts in json.loads(last["next_offsets"]).items() for p, v in parts.items()}


def lagging(committed: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Partitions not yet ingested up to ``target`` (exclusive end offsets), with how many records are missing (pure)."""
    return {tp: end - committed.get(tp, 0) for tp, end in sorted(target.items()) if committed.get(tp, 0) < end}


def lake_from_dir(lake_dir: str | None) -> LakeConfig:
    """The lake of a directory, or the environment's lake."""
    return LakeConfig.from_env(Path(lake_dir)) if lake_dir else LakeConfig.from_env()
