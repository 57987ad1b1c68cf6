"""Transaction topics (``<prefix>.transaction``): BEGIN/END events, parsed with ``from_json``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.decode.batch import TOMBSTONE, barrier, behind_barrier, unusable
from cdclake.decode.dead_letters import SideOutput, categorised, corrupt_or, dead
from cdclake.decode.options import DecodeOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CORRUPT = "_corrupt_record"
_JSON_OPTIONS = {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
_S = T.StringType()

TX_EVENT_WIRE = T.StructType(
    [
        T.StructField(f.TX_STATUS, _S),
        T.StructField(f.TX_ID, _S),
        T.StructField(f.TS_MS, _S),
        T.StructField(f.TX_EVENT_COUNT, _S),
        T.StructField(
            f.TX_DATA_COLLECTIONS,
            T.ArrayType(T.StructType([T.StructField(f.TX_DATA_COLLECTION, _S), T.StructField(f.TX_EVENT_COUNT, _S)])),
        ),
    ]
)


def _long(column: Column) -> Column:
    return column.try_cast("long")


def _parse(frame: DataFrame, wire: T.StructType, schemas: bool) -> tuple[DataFrame, Column]:
    """Parse ``value`` once with ``from_json``; returns the frame with ``_j`` and the column of the payload
    inside it."""
    value = F.col("value")
    if schemas:
        schema = T.StructType([T.StructField(f.PAYLOAD, wire), T.StructField(_CORRUPT, _S)])
    else:
        schema = T.StructType([*wire.fields, T.StructField(_CORRUPT, _S)])
    # The parse is a projection of its own. The optimizer does not inline it into the projection above (an
    # expensive expression referenced many times is never collapsed), but it would push a filter on the parsed
    # fields below it, substituting ``from_json`` into every field the filter reads: every caller therefore
    # filters above a projection holding a nondeterministic barrier (:func:`cdclake.decode.batch.barrier`).
    # Pinned by the plan test in tests/unit/decode/test_plan.py (one parse per topic). A Generate node
    # (``explode(array(...))``) would be a barrier too, but it breaks whole-stage codegen and copies every
    # parsed row: 30% slower.
    parsed = frame.select("*", F.from_json(value, schema, _JSON_OPTIONS).alias("_j"))
    env = F.col("_j." + f.PAYLOAD) if schemas else F.col("_j")
    return parsed, env


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


def decode_transactions(recs: DataFrame, topics: list[str], options: DecodeOptions) -> SideOutput:
    """The transaction events of ``topics``, their dead letters and their counting frame.

    All three read one narrow projection of the records (:attr:`SideOutput.staged`): the event's fields, its
    coordinates and, for a dead letter only, its raw key and value. :meth:`cdclake.decode.DecodedBatch.materialise`
    caches it, so the counting pass parses each record once and the transactions phase reads the cached rows.
    """
    frame = recs.where(F.col("topic").isin(*topics)) if topics else recs.where(F.lit(False))
    parsed, env = _parse(frame, TX_EVENT_WIRE, options.value_schemas_enabled)
    status = F.upper(env[f.TX_STATUS])
    reason = (
        F.when(F.col("value").isNull(), F.lit(TOMBSTONE))
        .when(F.col("_j." + _CORRUPT).isNotNull(), corrupt_or("type_mismatch"))
        .when(env.isNull(), F.lit("missing_payload"))
        .when(~F.coalesce(status.isin(f.TX_STATUS_BEGIN, f.TX_STATUS_END), F.lit(False)), F.lit("unknown_tx_status"))
        .when(env[f.TX_ID].isNull(), F.lit("missing_tx_id"))
    )
    collections = F.transform(
        env[f.TX_DATA_COLLECTIONS],
        lambda c: F.struct(
            c[f.TX_DATA_COLLECTION].alias("data_collection"), _long(c[f.TX_EVENT_COUNT]).alias("event_count")
        ),
    )
    fields = parsed.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        F.col("timestamp").alias("kafka_ts"),
        F.regexp_replace(F.col("topic"), r"\.transaction$", "").alias("server"),
        status.alias("status"),
        env[f.TX_ID].alias("id"),
        _long(env[f.TX_EVENT_COUNT]).alias("event_count"),
        collections.alias("data_collections"),
        F.timestamp_millis(_long(env[f.TS_MS])).alias("ts"),
        reason.alias("_reason"),
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
