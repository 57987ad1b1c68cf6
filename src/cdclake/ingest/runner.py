"""Entry points shared by ``cdclake ingest``/``replay`` and ``jobs/ingest.py``: build the source and run a batch.

Both hold the source's lock (:mod:`cdclake.ingest.lock`) while they run: a second run of the same source
waits for the first one, or gives up with :class:`~cdclake.exceptions.SourceBusyError`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from cdclake.connectors import ConnectorKind, ConnectorSpec, load_spec
from cdclake.decode.schema_source import NoSchemaSource, SchemaSource, SchemaSourceFactory
from cdclake.exceptions import ConfigError
from cdclake.ingest.batch import run_batch
from cdclake.ingest.config import SourceConfig
from cdclake.ingest.follow import FollowOptions, FollowReport, StopFlag, follow
from cdclake.ingest.lock import DEFAULT_WAIT_S, source_lock
from cdclake.ingest.offsets import GapAcceptance
from cdclake.ingest.sources import KafkaRecordSource, RecordSource, ReplayRecordSource, source_topic_patterns
from cdclake.ingest.summary import SOURCE_BUSY, BatchSummary
from cdclake.ingest.transactions import record_clock
from cdclake.lake import rows as lake_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def ingest_from_kafka(
    spark: SparkSession,
    spec: str,
    *,
    bootstrap: str | None = None,
    max_records: int | None = None,
    lock_wait_s: float = DEFAULT_WAIT_S,
    schema_source: SchemaSourceFactory | None = None,
    accept_gaps: GapAcceptance | None = None,
) -> BatchSummary:
    """One batch of the connector spec ``spec`` (name or path) from Kafka, under the source's lock.

    ``schema_source`` builds the column types' source when the spec's value schemas are off (required then).
    ``accept_gaps``: the gaps in Kafka's logs this run accepts (``--accept-gap``): those topic-partitions start at
    their log start, and the summary records them (``accepted_gaps``).

    Raises:
        ConnectorSpecError: when the spec is invalid.
        ConfigError: when value schemas are off and the schema source cannot be built.
        RecordSourceError: when Kafka cannot be read.
        OffsetGapError: when Kafka no longer holds the offsets a topic-partition continues from (records deleted
            before they were ingested, a topic re-created or truncated) and ``accept_gaps`` does not cover it;
            no batch is planned and nothing is read.
        SourceBusyError: when another run holds the source's lock for longer than ``lock_wait_s``.
    """
    loaded = load_spec(spec)
    source = SourceConfig.from_spec(
        loaded,
        schema_source=_schema_source(loaded, loaded.topic_prefix, schema_source),
        accept_gaps=accept_gaps,
    )
    servers = bootstrap or loaded.kafka_bootstrap_servers
    records = KafkaRecordSource(servers, source_topic_patterns(source.topic_prefix))
    with _closing(source.schema_source), source_lock(lake_rows.session_catalog(spark), source.name, wait_s=lock_wait_s):
        return run_capped_batch(spark, source, records, max_records)


def follow_kafka(
    spark: SparkSession,
    spec: str,
    *,
    bootstrap: str | None = None,
    schema_source: SchemaSourceFactory | None = None,
    options: FollowOptions | None = None,
    stop: StopFlag | None = None,
    on_batch: Callable[[BatchSummary], None] | None = None,
) -> FollowReport:
    """Batches of the connector spec ``spec`` (name or path) from Kafka as records arrive, on this session, until
    ``stop`` is set or a limit of ``options`` is reached (:mod:`cdclake.ingest.follow`). Each batch holds the
    source's lock while it runs; ``on_batch`` gets each batch's summary as it commits.

    Raises:
        ConnectorSpecError: when the spec is invalid.
        ConfigError: when value schemas are off and the schema source cannot be built.
        RecordSourceError: when Kafka cannot be read.
        OffsetGapError: when Kafka no longer holds the offsets a topic-partition continues from (accept the gap
            with one scheduled run, ``cdclake ingest --accept-gap``, then follow again).
    """
    loaded = load_spec(spec)
    source = SourceConfig.from_spec(loaded, schema_source=_schema_source(loaded, loaded.topic_prefix, schema_source))
    records = KafkaRecordSource(bootstrap or loaded.kafka_bootstrap_servers, source_topic_patterns(source.topic_prefix))
    with _closing(source.schema_source):
        catalog = lake_rows.session_catalog(spark)
        return follow(spark, source, records, catalog, run_capped_batch, options=options, stop=stop, on_batch=on_batch)


def _schema_source(
    spec: ConnectorSpec | None, topic_prefix: str, factory: SchemaSourceFactory | None
) -> SchemaSource | None:
    """The run's schema source when its records carry no value schema (None when they do).

    Raises:
        ConfigError: when they carry none and no factory is given.
    """
    if spec is not None and not spec.needs_schema_source:
        return None
    if factory is None:
        raise ConfigError(
            f"{spec.describe() if spec else 'the records'}: value schemas are off, so the job needs a schema "
            "source (cdclake.databases.schema_source.schema_source_for)"
        )
    built = factory(spec, topic_prefix)
    logger.info("schema source: %s", built.describe())
    return built


def run_capped_batch(
    spark: SparkSession, source: SourceConfig, records: RecordSource, max_records: int | None
) -> BatchSummary:
    """One batch; when the cap alone kept it from applying anything, batches again with the cap doubled.

    A transaction larger than ``max_records`` can never complete inside a capped range: without the
    growth every batch would hold it, and the source would stall (its age is measured up to the cap's cut,
    :mod:`cdclake.ingest.batch.plan`, which a held batch does not move). Each held batch is committed to the
    ledger as it is (no offsets advance), so the growth is exact.
    """
    cap = max_records
    while True:
        result = run_batch(spark, source, records, max_records=cap)
        if not (result.held_everything and cap is not None and (result.capped or result.records >= cap)):
            return result
        logger.warning(
            "source %s batch %s: a transaction does not fit max_records=%d; batching again with %d",
            source.name,
            result.batch_id,
            cap,
            cap * 2,
        )
        cap *= 2


def replay_files(
    spark: SparkSession,
    files: Sequence[str | Path],
    *,
    spec: str | None = None,
    topic_prefix: str | None = None,
    max_records: int | None = None,
    on_batch: Callable[[BatchSummary], None] | None = None,
    lock_wait_s: float = DEFAULT_WAIT_S,
    schema_source: SchemaSourceFactory | None = None,
) -> BatchSummary:
    """Batches over recorded JSON Lines files, exactly as if they were read from Kafka, until all is applied.

    The connector's topic prefix and converter settings come from ``spec`` when given, else from
    ``topic_prefix`` and the records themselves. When the records carry no value schema, ``schema_source``
    builds the source of their column types (required then). ``on_batch`` is called with each batch's summary as it
    commits; the last one is returned.

    Raises:
        ConfigError: when the files are missing or the topic prefix cannot be inferred.
        SourceBusyError: when another run holds the source's lock for longer than ``lock_wait_s``.
    """
    if spec:
        loaded = load_spec(spec)
        source = SourceConfig.from_spec(
            loaded, schema_source=_schema_source(loaded, loaded.topic_prefix, schema_source)
        )
        records = ReplayRecordSource(spark, files, source_topic_patterns(source.topic_prefix))
    else:
        probe = ReplayRecordSource(spark, files)
        inferred = probe.infer()
        prefix = topic_prefix or inferred["topic_prefix"]
        if not prefix:
            raise ConfigError("cannot infer the topic prefix from the records; pass --topic-prefix or --spec")
        value_schemas = inferred["value_schemas"]
        source = SourceConfig(
            name=str(prefix),
            topic_prefix=str(prefix),
            key_schemas=value_schemas is not False,
            value_schemas=value_schemas is not False,
            schema_source=(
                _schema_source(None, str(prefix), schema_source)
                if value_schemas is False and inferred["connector"] != ConnectorKind.MONGODB
                else None
            )
            or NoSchemaSource(),
        )
        records = ReplayRecordSource(spark, files, source_topic_patterns(source.topic_prefix))
        logger.info("replay: inferred %s", json.dumps(inferred))
    summary = BatchSummary(source=source.name, batch_id=None, status="no-new-records")
    # a replay applies everything in the files: run batches until the ledger has caught up, or until
    # a batch makes no progress (everything left belongs to transactions still incomplete in the files)
    # Transaction ages are measured on the records' clock: the files are replayed as they were read
    # when recorded, so a capture cut inside a transaction holds it however old the capture is.
    with (
        _closing(source.schema_source),
        record_clock(),
        source_lock(lake_rows.session_catalog(spark), source.name, wait_s=lock_wait_s),
    ):
        while True:
            result = run_capped_batch(spark, source, records, max_records)
            if result.batch_id is None:
                return summary if summary.batch_id else result
            summary = result
            if on_batch is not None:
                on_batch(result)
            if result.held_everything:
                return summary


@contextmanager
def _closing(schema_source: SchemaSource) -> Iterator[None]:
    try:
        yield
    finally:
        schema_source.close()


def busy_summary(spec: str, message: str) -> dict[str, object]:
    """The summary of a run that found the source busy (it read and wrote nothing)."""
    return {
        "source": load_spec(spec).name,
        "batch_id": None,
        "status": SOURCE_BUSY,
        "message": message,
        "records": 0,
        "tables": {},
        "changed_tables": [],
        "dead_lettered": 0,
        "checks": {"ok": True, "problems": []},
    }
