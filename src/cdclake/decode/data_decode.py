"""Decoding the data topics: one envelope decoder call per record gives the data columns and the envelope's
metadata; the Kafka coordinates, key and headers come from the record (:mod:`cdclake.decode.columns`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.decode.batch import RAW_RECORD, TOPIC_OUTPUT, StagedTopic, TableInfo, barrier, column
from cdclake.decode.columns import MetaColumn, Origin, change_columns
from cdclake.decode.counts import UNSAMPLED_MARKER, counted
from cdclake.decode.data_topics import DataTopic
from cdclake.decode.jvm import decode_call, output_type
from cdclake.decode.layout import schema_text
from cdclake.decode.options import DecodeOptions, TableId

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_S = T.StringType()


def meta_columns(dt: DataTopic, options: DecodeOptions) -> tuple[MetaColumn, ...]:
    """The metadata columns of a data topic's change rows."""
    return change_columns(
        document_store=dt.dialect.document_store,
        before=dt.plan is not None and options.include_before,
        key=options.include_key,
        messages=dt.dialect.has_unavailable_placeholder,
    )


def _record_value(meta: MetaColumn) -> Column:
    """A metadata column that comes from the record itself."""
    if meta.origin is Origin.HEADER:
        # first header with this key; no lambda (higher-order functions would switch the projection to
        # interpreted mode)
        index = F.array_position(F.col("headers.key"), F.lit(meta.source))
        return F.get(F.col("headers.value"), (index - F.lit(1)).cast("int")).cast("string")
    return F.col(str(meta.source))


def _header_check(reason: Column) -> Column:
    """``invalid_header`` for an otherwise usable record whose Debezium key headers (a primary key change's
    ``__debezium.oldkey``/``__debezium.newkey``) are not JSON; other headers are not read, so not checked."""
    bad = F.lit(False)
    for name in (f.HEADER_OLD_KEY, f.HEADER_NEW_KEY):
        index = F.array_position(F.col("headers.key"), F.lit(name))
        text = F.get(F.col("headers.value"), (index - F.lit(1)).cast("int")).cast("string")
        bad = bad | F.coalesce((index > F.lit(0)) & F.try_parse_json(text).isNull(), F.lit(False))
    return F.when(reason.isNull() & bad, F.lit("invalid_header")).otherwise(reason)


def data_plan(dt: DataTopic, options: DecodeOptions, sampled: bool) -> tuple[dict[str, Any], T.StructType]:
    """The envelope decoder's plan of a data topic and the struct it returns (see :mod:`cdclake.decode.jvm`)."""
    dialect, plan = dt.dialect, dt.plan
    outputs = ["document"] if dialect.document_store else ["data"]
    outputs += [str(c.source) for c in meta_columns(dt, options) if c.origin is Origin.DECODER]
    outputs += ["reason", "invalid", "unsampled"]
    decoder = {
        "kind": "data",
        "position": dialect.position_rule,
        "connectors": list(dialect.connectors),
        "default_connector": dialect.name,
        "document_store": dialect.document_store,
        "schemas": options.value_schemas_enabled,
        "prefixes": list(dt.prefixes),
        "check_sampled": sampled and options.value_schemas_enabled,
        "include_before": options.include_before,
        "columns": [] if plan is None else plan.codecs(placeholders=dialect.has_unavailable_placeholder),
        "outputs": outputs,
        "identity": dict(dt.identity),
        "key_columns": [] if dialect.document_store else list(dt.key_columns),
        "keyed": dt.keyed,
        "max_record_bytes": options.max_record_bytes,
    }
    relational = plan is not None and not dialect.document_store
    return decoder, output_type(
        outputs,
        columns=plan.spark if relational else None,
        before=plan.spark if relational and options.include_before else None,
    )


def decode_data_topic(recs: DataFrame, dt: DataTopic, options: DecodeOptions, sampled: bool) -> StagedTopic:
    """The topic's decoding projection (tombstones included, see :class:`StagedTopic`).

    ``sampled``: the schema versions come from a sample alone (:func:`cdclake.decode.discovery.discover_sample`);
    with schemas on, a usable envelope that does not start with a sampled schema text fails the pass
    (:data:`UNSAMPLED_MARKER`).
    """
    dialect, plan = dt.dialect, dt.plan
    frame = recs.where(F.col("topic") == F.lit(dt.topic))
    if dt.keep_hashes is not None:  # a later schema version changed a column's type: see DecodedBatch.schema_cuts
        frame = frame.where(F.col("value").isNull() | F.xxhash64(schema_text(F.col("value"))).isin(*dt.keep_hashes))
    decoder, return_type = data_plan(dt, options, sampled)
    # The decoding is a projection of its own. The optimizer does not inline it into the projection above (an
    # expensive expression referenced many times is never collapsed), but it would push a filter on its fields
    # below it, calling the decoder again for every field the filter reads: every caller therefore filters above
    # a projection holding a nondeterministic barrier (:func:`cdclake.decode.batch.barrier`). Pinned by the plan
    # test in tests/unit/decode/test_plan.py (one decoder call per topic).
    parsed = frame.select("*", decode_call(recs.sparkSession, decoder, return_type).alias("_d"))
    d = F.col("_d")

    def out(name: str) -> Column:
        return d.getField(name)

    reason = _header_check(out("reason"))
    if dt.dead_hashes:  # schema versions discovery refused (see cdclake.decode.envelope_checks)
        fingerprint = F.xxhash64(schema_text(F.col("value")))
        for hashed, why in sorted(dt.dead_hashes.items()):
            reason = F.when(F.col("value").isNotNull() & (fingerprint == F.lit(hashed)), F.lit(why)).otherwise(reason)
    if decoder["check_sampled"]:
        reason = F.when(
            out("unsampled"),
            F.raise_error(
                F.format_string(
                    f"{UNSAMPLED_MARKER} a schema version of topic {dt.topic} that the sample did not show "
                    "(partition %d, offset %d)",
                    F.col("partition"),
                    F.col("offset"),
                )
            ).cast("string"),
        ).otherwise(reason)

    if dialect.document_store:
        key_id = F.get_json_object(
            F.col("key"), "$." + (f.PAYLOAD + "." if options.key_schemas_enabled else "") + f.MONGO_KEY_ID
        )
        data_cols = [key_id.alias(f.MONGO_KEY_ID), out("document").alias("document")]
    else:
        data_cols = [out(name).alias(name, metadata=p.metadata) for name, p in (plan.columns if plan else ())]
    meta_cols = [
        (out(str(c.source)) if c.origin is Origin.DECODER else _record_value(c)).alias(c.name)
        for c in meta_columns(dt, options)
    ]
    # One projection holds every output column, the dead-letter reason and the validity flag; the
    # nondeterministic (and free) spark_partition_id() column keeps the optimizer from pushing the filters below
    # it, which would call the decoder again.
    outputs = [*data_cols, *meta_cols]
    staged = parsed.select(
        *outputs,
        *[F.col(c).alias(f"_raw_{c}") for c in ("key", "value")],
        reason.alias("_reason"),
        out("invalid").alias("_invalid"),
        barrier(),
    )
    names = tuple(staged.columns[: len(outputs)])
    # the raw record is only kept for the dead letters (a cached frame then holds no second copy of each record),
    # and the topic, a constant, not at all (StagedTopic adds it)
    bad = StagedTopic.undecodable()
    masked = staged.select(
        *[column(c) for c in names if c != TOPIC_OUTPUT],
        *[F.when(bad, F.col(c)).alias(c) for c in RAW_RECORD],
        "_reason",
        "_invalid",
        "_barrier",
    )
    return StagedTopic(dt.table_id, masked, names, dt.topic)


def decode_signal_topic(recs: DataFrame, dt: DataTopic, options: DecodeOptions) -> DataFrame:
    """The counting frame of a signal table's topic (its records are skipped)."""
    path = "$." + (f.PAYLOAD + "." if options.value_schemas_enabled else "") + "after.type"
    kind = F.get_json_object(F.col("value"), path)
    watermark = F.coalesce(kind.isin(f.SIGNAL_WINDOW_OPEN, f.SIGNAL_WINDOW_CLOSE), F.lit(False))
    category = (
        F.when(F.col("value").isNull(), F.lit("tombstones"))
        .when(watermark, F.lit("watermarks_skipped"))
        .otherwise(F.lit("signals_skipped"))
    )
    return counted(recs.where(F.col("topic") == F.lit(dt.topic)), category)


@dataclass
class DecodedData:
    """The data topics' decoding projections and what the batch says of their tables.

    Attributes:
        topics: the data topics (signal tables' included).
        staged: one decoding projection per data topic (signal tables aside).
        info: per table, its :class:`TableInfo`.
        categories: the counting frames of the signal tables' topics.
        schema_cuts: per (topic, partition), where an incompatible schema change cuts it.
        cut_reasons: per table name, why its topic was cut.
    """

    topics: list[str] = field(default_factory=list)
    staged: list[StagedTopic] = field(default_factory=list)
    info: dict[TableId, TableInfo] = field(default_factory=dict)
    categories: list[DataFrame] = field(default_factory=list)
    schema_cuts: dict[tuple[str, int], int] = field(default_factory=dict)
    cut_reasons: dict[str, str] = field(default_factory=dict)


def decode_data_topics(recs: DataFrame, topics: list[DataTopic], options: DecodeOptions, sampled: bool) -> DecodedData:
    """Decode every planned data topic (a table's topics share its :class:`TableInfo`)."""
    out = DecodedData([dt.topic for dt in topics])
    for dt in topics:
        if dt.signal:
            out.categories.append(decode_signal_topic(recs, dt, options))
            continue
        if dt.cuts:
            out.schema_cuts.update(dt.cuts)
            out.cut_reasons[dt.table_id.name] = f"{dt.topic}: {dt.cut_reason}"
        out.staged.append(decode_data_topic(recs, dt, options, sampled))
        if dt.table_id in out.info:
            old = out.info[dt.table_id]
            out.info[dt.table_id] = TableInfo(
                dt.table_id, old.connector, (*old.topics, dt.topic), old.key_columns, old.schema, old.schema_versions
            )
        else:
            out.info[dt.table_id] = TableInfo(
                dt.table_id, dt.dialect.name, (dt.topic,), dt.key_columns, _table_schema(dt), dt.versions
            )
    return out


def _table_schema(dt: DataTopic) -> T.StructType:
    """The Spark schema of a data topic's data columns."""
    if dt.dialect.document_store:
        return T.StructType(
            [
                T.StructField(f.MONGO_KEY_ID, _S, True, {"cdc.connect.type": "string"}),
                T.StructField("document", _S, True, {"cdc.connect.type": "string", "cdc.logical.type": f.DBZ_JSON}),
            ]
        )
    return dt.plan.spark if dt.plan else T.StructType([])
