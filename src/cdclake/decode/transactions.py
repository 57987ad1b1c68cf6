"""Transaction topics (``<prefix>.transaction``): BEGIN/END events, read by the envelope decoder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdclake.decode.batch import barrier, behind_barrier, unusable
from cdclake.decode.dead_letters import SideOutput, categorised, dead
from cdclake.decode.jvm import decode_topics, output_type
from cdclake.decode.options import DecodeOptions

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame

#: What the decoder returns of a BEGIN/END event (``dev.cdclake.decode.TransactionDecoder``).
_TX_OUTPUTS = ("status", "tx_id", "event_count", "data_collections", "ts", "reason")


#: The columns of the transaction events (``DecodedBatch.transactions``).
TX_ROW_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "kafka_ts",
    "server",
    "status",
    "id",
    "event_count",
    "data_collections",
    "ts",
)


def decode_transactions(recs: DataFrame, topics: Mapping[str, Sequence[str]], options: DecodeOptions) -> SideOutput:
    """The transaction events of ``topics`` (each with its sampled schema texts, which the decoder skips), their
    dead letters and their counting frame.

    One envelope decoder per topic reads each record once: a record that starts with a sampled schema text is
    parsed from its payload on; the rest, and the reasons a record is a dead letter, as for the data topics
    (:mod:`cdclake.decode.jvm`). All three outputs read one narrow projection of the records
    (:attr:`SideOutput.staged`): the event's fields, its coordinates and, for a dead letter only, its raw key and
    value. :meth:`cdclake.decode.DecodedBatch.materialise` caches it, so the counting pass decodes each record once
    and the transactions phase reads the cached rows.
    """
    plans = {
        topic: {
            "kind": "transaction",
            "schemas": options.value_schemas_enabled,
            "prefixes": list(prefixes) if options.value_schemas_enabled else [],
            "outputs": list(_TX_OUTPUTS),
            "max_record_bytes": options.max_record_bytes,
        }
        for topic, prefixes in sorted(topics.items()) or [(None, [])]
    }
    # The decoding is a projection of its own, filtered above a barrier (see cdclake.decode.data_decode)
    parsed = decode_topics(recs, plans, output_type(_TX_OUTPUTS))
    d = F.col("_d")
    fields = parsed.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        F.col("timestamp").alias("kafka_ts"),
        F.regexp_replace(F.col("topic"), r"\.transaction$", "").alias("server"),
        d.getField("status").alias("status"),
        d.getField("tx_id").alias("id"),
        d.getField("event_count").alias("event_count"),
        d.getField("data_collections").alias("data_collections"),
        d.getField("ts").alias("ts"),
        d.getField("reason").alias("_reason"),
    )
    bad = unusable(F.col("_reason"))
    staged = fields.select(
        *[F.col(c) for c in fields.columns if c not in ("key", "value")],
        *[F.when(bad, F.col(c)).alias(c) for c in ("key", "value")],
        barrier(),
    )
    rows = staged.where(behind_barrier(F.col("_reason").isNull())).select(*TX_ROW_COLUMNS)
    return SideOutput(
        rows, dead(staged.where(behind_barrier(bad)), F.col("_reason")), categorised(staged, "transactions"), staged
    )
