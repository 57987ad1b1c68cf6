"""Schema change topics (MySQL, MariaDB, Informix): DDL events, read by the envelope decoder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.decode.dead_letters import SideOutput, categorised, dead, split
from cdclake.decode.jvm import decode_topics, output_type
from cdclake.decode.options import DecodeOptions
from cdclake.dialects import Dialect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_SCHEMA_CHANGE_OUTPUTS = (
    "server", "connector", "database_name", "schema_name", "ddl", "table_changes", "source_ts", "ts", "position",
    "reason",
)  # fmt: skip


def decode_schema_changes(recs: DataFrame, topics: dict[str, Dialect | None], options: DecodeOptions) -> SideOutput:
    """The schema change events of ``topics``, their dead letters and their counting frame.

    One envelope decoder per topic (its dialect gives the position rule; a topic of an unknown connector has
    no position).
    """
    plans = {
        topic: {
            "kind": "schema_change",
            "position": dialect.position_rule if dialect is not None else None,
            "default_connector": dialect.name if dialect is not None else None,
            "schemas": options.value_schemas_enabled,
            "prefixes": [],
            "outputs": list(_SCHEMA_CHANGE_OUTPUTS),
            "max_record_bytes": options.max_record_bytes,
        }
        for topic, dialect in sorted(topics.items()) or [(None, None)]
    }
    parsed = decode_topics(recs, plans, output_type(_SCHEMA_CHANGE_OUTPUTS))
    d = F.col("_d")
    staged, usable, unusable = split(parsed, d.getField("reason"))
    rows = staged.where(usable).select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
        F.coalesce(d.getField("server"), F.col("topic")).alias("server"),
        *[d.getField(n).alias(n) for n in _SCHEMA_CHANGE_OUTPUTS if n not in ("server", "reason")],
    )
    return SideOutput(rows, dead(staged.where(unusable), F.col("_reason")), categorised(staged, "schema_changes"))
