"""The metadata columns of the change rows (after the source columns). Lake identifiers: :mod:`cdclake.lake.names`."""

from __future__ import annotations

#: Metadata columns of every upsert table (after the source columns).
META_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_cdc_op", "STRING"),
    ("_cdc_source_ts", "TIMESTAMP"),
    ("_cdc_position", "ARRAY<DECIMAL(38,0)>"),
    ("_cdc_tx_id", "STRING"),
    ("_cdc_topic", "STRING"),
    ("_cdc_partition", "INT"),
    ("_cdc_offset", "BIGINT"),
    ("_cdc_ingested_at", "TIMESTAMP"),
)
META_NAMES = tuple(name for name, _ in META_COLUMNS)
