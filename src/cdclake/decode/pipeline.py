"""``decode_records``: Kafka records of Debezium topics -> typed change rows per table plus side outputs.

The decoding is a sequence of phases, each in a module of its own: discovery (:mod:`~cdclake.decode.discovery`),
classification (:mod:`~cdclake.decode.classification`), the data topics' planning and decoding
(:mod:`~cdclake.decode.data_topics`, :mod:`~cdclake.decode.data_decode`), the side outputs
(:mod:`~cdclake.decode.transactions`, :mod:`~cdclake.decode.schema_changes`,
:mod:`~cdclake.decode.dead_letters`) and the counts (:mod:`~cdclake.decode.counts`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from cdclake.decode.batch import DecodedBatch
from cdclake.decode.classification import TopicKinds, classify_topics
from cdclake.decode.counts import DecodeCounts, other_categories
from cdclake.decode.data_decode import DecodedData, decode_data_topics
from cdclake.decode.data_topics import plan_data_topics
from cdclake.decode.dead_letters import SideOutput, topic_dead_letters, union_dead_letters
from cdclake.decode.discovery import discover_topics
from cdclake.decode.options import DecodeOptions, RecordFormat
from cdclake.decode.records import RecordSampler, normalise_records
from cdclake.decode.schema_changes import decode_schema_changes
from cdclake.decode.transactions import decode_transactions
from cdclake.exceptions import ConfigError, UnsampledRecordsError

if TYPE_CHECKING:
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)


def decode_records(
    records: DataFrame,
    *,
    options: DecodeOptions,
    sampler: RecordSampler | None = None,
    sample_only: bool = False,
) -> DecodedBatch:
    """Decode a batch of Debezium Kafka records.

    Pure: builds lazy DataFrames over ``records`` (small discovery jobs collect per-topic schema samples to
    the driver). Callers that consume several outputs should ``persist()`` ``records`` first, unless reading
    them again is cheaper (the ingestion job's Kafka reads, see :class:`cdclake.ingest.sources.RecordSource`).

    Args:
        records: ``topic, partition, offset, timestamp, key, value, headers`` as Spark's Kafka source gives them
            (``includeHeaders=true``); key/value may be binary or string.
        options: converter settings, topic prefix, schema source, signal tables.
        sampler: reads sample records of ``records`` without scanning them; without one, discovery filters
            ``records`` for its samples (two more passes over them).
        sample_only: with a ``sampler``, trust its sample when it is conclusive (one schema version per topic):
            no pass over the records before decoding. A record the sample did not foresee then fails the
            first pass over the outputs with :class:`~cdclake.exceptions.UnsampledRecordsError` (raised by
            :meth:`DecodedBatch.counts`): use :func:`decode_counted`, which decodes such a batch again.

    Returns:
        The decoded tables and side outputs.

    Raises:
        ConfigError: Avro requested (not implemented) or the session time zone is not UTC.
    """
    _check_supported(records, options)
    recs = normalise_records(records)
    topics, sampled = discover_topics(recs, options, sampler, sample_only=sample_only)
    kinds = classify_topics(topics, options)
    planned = plan_data_topics(kinds.data, options)
    data = decode_data_topics(recs, planned.topics, options, sampled)
    transactions = decode_transactions(recs, {t: topics[t].prefixes for t in kinds.transactions}, options)
    schema_changes = decode_schema_changes(recs, kinds.schema_changes, options)
    undecodable = {**kinds.unrecognised, **planned.failed}
    return _assemble(recs, kinds, data, transactions, schema_changes, undecodable, sampled)


def _check_supported(records: DataFrame, options: DecodeOptions) -> None:
    if RecordFormat.AVRO in (options.key_format, options.value_format):
        raise ConfigError("value_format/key_format 'avro' is not implemented; use the JsonConverter")
    zone = records.sparkSession.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "Z", "+00:00"):
        raise ConfigError(
            f"spark.sql.session.timeZone is {zone!r}; decoding needs UTC (build the session with build_spark_session)"
        )


def _assemble(
    recs: DataFrame,
    kinds: TopicKinds,
    data: DecodedData,
    transactions: SideOutput,
    schema_changes: SideOutput,
    undecodable: dict[str, str],
    sampled: bool,
) -> DecodedBatch:
    """The batch: change rows per table, side outputs, and the counting frames of every record.

    ``undecodable``: the topics whose records are all dead letters, with the reason.
    """
    decoded = [*kinds.transactions, *kinds.schema_changes, *data.topics]
    categories = [
        *data.categories,
        transactions.categories,
        schema_changes.categories,
        other_categories(recs, {**kinds.other, **dict.fromkeys(undecodable, "dead_letters")}, decoded),
    ]

    def other_dead() -> DataFrame:
        return union_dead_letters(
            recs, [*topic_dead_letters(recs, undecodable), transactions.dead, schema_changes.dead]
        )

    logger.info(
        "decoded batch: %s tables, %s transaction topics, %s schema change topics, prefixes %s, discovery %s",
        len(data.info),
        len(kinds.transactions),
        len(kinds.schema_changes),
        sorted(kinds.prefixes),
        "by sample" if sampled else "by pass",
    )
    return DecodedBatch(
        data.info,
        transactions.rows,
        schema_changes.rows,
        categories,
        data.schema_cuts,
        data.cut_reasons,
        data.staged,
        other_dead,
        discovery="sample" if sampled else "pass",
        _side_staged=[o.staged for o in (transactions, schema_changes) if o.staged is not None],
    )


def decode_counted(
    records: DataFrame,
    *,
    options: DecodeOptions,
    sampler: RecordSampler | None = None,
    level: StorageLevel | None = None,
    key_values: bool = False,
) -> tuple[DecodedBatch, DecodeCounts]:
    """Decode, :meth:`~DecodedBatch.materialise` and :meth:`~DecodedBatch.counts` a batch, trusting the sample.

    With a ``sampler`` whose sample is conclusive (``decode_records(..., sample_only=True)``), there is no
    pass over the records before decoding: the counting pass, which fills the cache, also checks that every
    record was foreseen. If one was not (a schema version or a topic outside the sample), the batch is decoded
    again, with discovery by a pass: slower, never wrong. ``key_values``: the counting pass also collects the
    distinct values of each table's key columns (:meth:`~DecodedBatch.counts`).

    Returns:
        The materialised batch (call :meth:`~DecodedBatch.release` when done) and its counts.
    """
    if sampler is not None:
        batch = decode_records(records, options=options, sampler=sampler, sample_only=True).materialise(level)
        try:
            return batch, batch.counts(key_values)
        except UnsampledRecordsError as exc:
            batch.release()
            logger.warning("discovery by sample missed records (%s); discovering by a pass over the batch", exc)
    batch = decode_records(records, options=options, sampler=sampler).materialise(level)
    return batch, batch.counts(key_values)
