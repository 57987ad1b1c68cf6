"""The result of :func:`cdclake.decode.decode_records`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.decode.columns import TOPIC
from cdclake.decode.counts import DATA, NO_OP, OPS, DecodeCounts, count, counted
from cdclake.decode.options import TableId
from cdclake.sql import quote_identifier

if TYPE_CHECKING:
    from pyspark import StorageLevel
    from pyspark.sql.types import StructType

#: Columns of a :class:`StagedTopic` frame besides the outputs: the raw record of a dead letter (null for a
#: decoded record). Its coordinates are the outputs ``_cdc_partition`` and ``_cdc_offset``; the topic is the
#: staged topic's own.
RAW_RECORD = ("_raw_key", "_raw_value")

#: The output holding the record's topic (a constant of each :class:`StagedTopic`, not stored in its frame).
TOPIC_OUTPUT = TOPIC.name

#: ``_reason`` of a record with a null value (a Kafka tombstone): counted, neither a change row nor a dead letter.
TOMBSTONE = "tombstone"

#: The key column types whose values bound the applier's scans (:func:`cdclake.ingest.apply.key_literal`): the
#: counting pass observes the least, greatest and distinct values of key columns of these types only.
BOUNDED_KEY_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType, T.DecimalType, T.StringType)
#: The integral ones among :data:`BOUNDED_KEY_TYPES`.
INTEGRAL_KEY_TYPES = BOUNDED_KEY_TYPES[:4]


def bounded_keys(key_columns: Sequence[str], schema: T.StructType) -> tuple[str, ...]:
    """The columns of ``key_columns`` that ``schema`` holds with a type in :data:`BOUNDED_KEY_TYPES`, in key
    order (pure)."""
    types = {f.name: f.dataType for f in schema.fields}
    return tuple(k for k in key_columns if isinstance(types.get(k), BOUNDED_KEY_TYPES))


@dataclass(frozen=True)
class TableInfo:
    """What the ingestion job needs to know about one decoded table.

    Attributes:
        table_id: the table.
        connector: ``source.connector`` of its events.
        topics: Kafka topics it was read from.
        key_columns: primary-key column names (from the key schema).
        schema: Spark schema of the data columns; each field's metadata holds ``cdc.connect.type``,
            ``cdc.logical.type`` (Debezium/Connect logical name) and ``cdc.parameters``.
        schema_versions: number of distinct Connect value schemas seen in the batch (merged by name).
    """

    table_id: TableId
    connector: str
    topics: tuple[str, ...]
    key_columns: tuple[str, ...]
    schema: StructType
    schema_versions: int = 1


@dataclass(frozen=True)
class TableStats:
    """What applying a table's change rows needs to know of them first: events per op, the greatest position
    (the batch's watermark for the table) and the least, the last truncate's position, the columns that carry an
    unavailable-value placeholder, and how many rows belong to a transaction; and, for the batch summary,
    the first and last source commit time (``source.ts_ms``) among them.

    The decoder's counting pass observes them (:meth:`DecodedBatch.table_stats`); the applier computes them
    itself (one pass over the rows) when the rows it applies are not all the decoded ones.

    They also hold what bounds the rows' keys, for the applier's scans (see
    :func:`cdclake.ingest.apply.key_bounds`): each key column's least and greatest value and, when collected,
    its distinct values. A key column missing from them is not bounded.
    """

    events: dict[str, int]
    watermark: list[int] | None
    truncate: list[int] | None
    keep: list[str]
    #: change rows that carry a transaction id (none: the table has nothing for transaction gathering)
    transactional: int = 0
    #: the least position among the rows (None: not observed)
    floor: list[int] | None = None
    #: the earliest and latest ``source.ts_ms`` of the rows (naive, in the session's time zone: UTC)
    source_ts_first: datetime | None = None
    source_ts_last: datetime | None = None
    #: each key column's least and greatest value among the rows (a column without a non-null value: absent)
    key_least: dict[str, Any] = field(default_factory=dict)
    key_greatest: dict[str, Any] = field(default_factory=dict)
    #: each key column's distinct non-null values, when they were collected (:meth:`aggregates`)
    key_values: dict[str, list[Any]] | None = None

    @staticmethod
    def aggregates(rows: Column | None = None, keys: Sequence[str] = (), key_values: bool = False) -> list[Column]:
        """The aggregate columns the stats are read from (:meth:`from_row`), over ``rows`` (default: all); with
        the least and greatest value of each of ``keys`` and, ``key_values``, their distinct values."""
        pick = (lambda c: F.when(rows, c)) if rows is not None else (lambda c: c)
        bounds = [F.min(pick(column(k))).alias(f"key_lo{i}") for i, k in enumerate(keys)]
        bounds += [F.max(pick(column(k))).alias(f"key_hi{i}") for i, k in enumerate(keys)]
        if key_values:
            bounds += [F.collect_set(pick(column(k))).alias(f"key_in{i}") for i, k in enumerate(keys)]
        return [
            *bounds,
            *[F.count_if(pick(F.col("_cdc_op") == op)).alias(op) for op in OPS],
            F.max(pick(F.col("_cdc_position"))).alias("top"),
            F.min(pick(F.col("_cdc_position"))).alias("bottom"),
            F.max(pick(F.when(F.col("_cdc_op") == "t", F.col("_cdc_position")))).alias("truncate"),
            F.array_distinct(F.flatten(F.collect_set(pick(F.col("_cdc_keep_columns"))))).alias("keep"),
            F.count_if(pick(F.col("_cdc_tx_id").isNotNull())).alias("transactional"),
            F.min(pick(F.col("_cdc_source_ts"))).alias("source_ts_first"),
            F.max(pick(F.col("_cdc_source_ts"))).alias("source_ts_last"),
        ]

    @classmethod
    def from_row(cls, row: Mapping[str, Any], keys: Sequence[str] = (), key_values: bool = False) -> TableStats:
        """The stats of a row of :meth:`aggregates` (with the same ``keys`` and ``key_values``)."""
        least = {k: row[f"key_lo{i}"] for i, k in enumerate(keys) if row[f"key_lo{i}"] is not None}
        greatest = {k: row[f"key_hi{i}"] for i, k in enumerate(keys) if row[f"key_hi{i}"] is not None}
        return cls(
            events={op: int(row[op]) for op in OPS if row[op]},
            watermark=[int(x) for x in row["top"]] if row["top"] is not None else None,
            truncate=[int(x) for x in row["truncate"]] if row["truncate"] is not None else None,
            keep=sorted(row["keep"] or []),
            transactional=int(row["transactional"] or 0),
            floor=[int(x) for x in row["bottom"]] if row["bottom"] is not None else None,
            source_ts_first=row["source_ts_first"],
            source_ts_last=row["source_ts_last"],
            key_least=least,
            key_greatest=greatest,
            key_values={k: list(row[f"key_in{i}"]) for i, k in enumerate(keys)} if key_values else None,
        )

    @classmethod
    def combine(cls, parts: list[TableStats]) -> TableStats:
        """The stats of the union of the parts' rows (a table read from several topics)."""
        events: dict[str, int] = {}
        for part in parts:
            for op, n in part.events.items():
                events[op] = events.get(op, 0) + n
        marks = [p.watermark for p in parts if p.watermark is not None]
        truncates = [p.truncate for p in parts if p.truncate is not None]
        floors = [p.floor for p in parts if p.events]
        return cls(
            events=events,
            watermark=max(marks) if marks else None,
            truncate=max(truncates) if truncates else None,
            keep=sorted({k for p in parts for k in p.keep}),
            transactional=sum(p.transactional for p in parts),
            # a part with rows but no floor observed leaves the union's unknown
            floor=min(floors) if floors and all(f is not None for f in floors) else None,  # type: ignore[type-var]
            source_ts_first=min((p.source_ts_first for p in parts if p.source_ts_first), default=None),
            source_ts_last=max((p.source_ts_last for p in parts if p.source_ts_last), default=None),
            **_combined_keys(parts),
        )


def _combined_keys(parts: Sequence[TableStats]) -> dict[str, Any]:
    """The key fields of :meth:`TableStats.combine`: a key column is bounded only when every part with rows
    bounds it (a part without change rows bounds nothing and takes nothing away), its values known only when
    every such part collected them."""
    bounded = [p for p in parts if p.events]
    if not bounded:
        return {}
    names = set.intersection(*(set(p.key_least) for p in bounded))
    least = {k: min(p.key_least[k] for p in bounded) for k in names}
    greatest = {k: max(p.key_greatest[k] for p in bounded) for k in names}
    collected = [p.key_values for p in bounded]
    values: dict[str, list[Any]] | None = None
    if all(v is not None for v in collected):
        # duplicates across parts are harmless (the bounds make a set of the values' literals)
        values = {k: [x for v in collected for x in v[k]] for k in names}  # type: ignore[index]
    return {"key_least": least, "key_greatest": greatest, "key_values": values}


def barrier() -> Column:
    """A free nondeterministic column: a filter above the projection holding it is not pushed below it."""
    return F.spark_partition_id().alias("_barrier")


def behind_barrier(condition: Column) -> Column:
    """``condition`` on a projection that holds a ``_barrier`` column, referencing the barrier.

    The reference keeps the projection (and with it the nondeterministic barrier) below the filter, so the
    optimizer cannot push the filter under it and compute every conversion twice.
    """
    return (F.col("_barrier") >= F.lit(0)) & condition


def unusable(reason: Column) -> Column:
    """True when ``reason`` makes a record a dead letter: any reason but :data:`TOMBSTONE`."""
    return F.coalesce(reason != F.lit(TOMBSTONE), F.lit(False))


def column(name: str) -> Column:
    """The column called ``name``, whatever characters the name has (dots, backticks)."""
    return F.col(quote_identifier(name))


@dataclass
class StagedTopic:
    """One data topic's decoding projection, before it is split into change rows and dead letters.

    ``frame`` holds, per record, the output columns (``outputs``; ``_cdc_topic`` is not in the frame, it is the
    constant ``topic``, added by :meth:`good`), the record's raw key and value only when it is undecodable
    (:data:`RAW_RECORD`, null otherwise, so a cached frame does not keep a second copy of every record),
    ``_reason`` (why the envelope is unusable, or null), ``_invalid`` (a value cannot be represented) and
    ``_barrier`` (a free nondeterministic column that keeps the optimizer from pushing the split below the
    projection, which would call the decoder again).
    """

    table_id: TableId
    frame: DataFrame
    outputs: tuple[str, ...]
    topic: str

    @staticmethod
    def undecodable() -> Column:
        """True for a record of the projection that is a dead letter (unusable envelope or value)."""
        return unusable(F.col("_reason")) | F.col("_invalid")

    def _bad(self) -> Column:
        return behind_barrier(self.undecodable())

    def good(self) -> DataFrame:
        """The change rows."""
        usable = behind_barrier(F.col("_reason").isNull() & ~F.col("_invalid"))
        topic = F.lit(self.topic).alias(TOPIC_OUTPUT)
        return self.frame.where(usable).select(*[topic if c == TOPIC_OUTPUT else column(c) for c in self.outputs])

    def categories(
        self,
        table: int,
        observation: Observation | None = None,
        keys: Sequence[str] = (),
        key_values: bool = False,
    ) -> DataFrame:
        """The counting frame of the records (:func:`cdclake.decode.counts.counted`): change rows (of table
        number ``table``), tombstones and dead letters.

        With an ``observation``, the same pass observes the :class:`TableStats` of the change rows, with the
        bounds of their ``keys`` (:meth:`TableStats.aggregates`).
        """
        category = (
            F.when(F.col("_reason") == F.lit(TOMBSTONE), F.lit("tombstones"))
            .when(self.undecodable(), F.lit("dead_letters"))
            .otherwise(F.lit(DATA))
        )
        op = F.when(category == F.lit(DATA), F.coalesce(F.col("_cdc_op"), F.lit(NO_OP)))
        frame = self.frame
        if observation is not None:
            change_row = F.col("_reason").isNull() & ~F.col("_invalid")
            frame = frame.observe(observation, *TableStats.aggregates(change_row, keys, key_values))
        return counted(frame, category, table, op)

    def dead(self) -> DataFrame:
        """The undecodable records: ``topic, partition, offset, key, value, reason``."""
        return self.frame.where(self._bad()).select(
            F.lit(self.topic).alias("topic"),
            F.col("_cdc_partition").alias("partition"),
            F.col("_cdc_offset").alias("offset"),
            *[F.col(c).alias(c.removeprefix("_raw_")) for c in RAW_RECORD],
            F.coalesce(F.col("_reason"), F.lit("unrepresentable_value")).alias("reason"),
        )


def table_rows(staged: list[StagedTopic]) -> dict[TableId, DataFrame]:
    """Change rows per table (the union of the table's topics), from the data topics' projections."""
    tables: dict[TableId, DataFrame] = {}
    for topic in staged:
        good = topic.good()
        previous = tables.get(topic.table_id)
        tables[topic.table_id] = good if previous is None else previous.unionByName(good, allowMissingColumns=True)
    return tables


def all_dead_letters(staged: list[StagedTopic], other_dead: DataFrame) -> DataFrame:
    """Every dead letter: the data topics' projections' and ``other_dead`` (transaction and schema change topics,
    unrecognised topics)."""
    return reduce(DataFrame.unionByName, (t.dead() for t in staged), other_dead)


@dataclass
class DecodedBatch:
    """Decoded change rows per table plus the side outputs of one batch of Kafka records.

    :attr:`tables` and :attr:`dead_letters` are built from the data topics' projections when first read (each
    DataFrame call costs the driver an analysis of its plan, and a batch without dead letters never reads them).

    Attributes:
        table_info: per table, key columns and the typed schema with logical-type metadata.
        transactions: BEGIN/END events of ``<prefix>.transaction`` topics.
        schema_changes: events of the schema change topic (MySQL/MariaDB/Informix).
        schema_cuts: per (topic, partition), the offset of the first record whose Connect schema changed a
            column's type incompatibly with the earlier records of the batch (e.g. string -> int). Those
            records and everything after them in the partition are left out of ``tables`` (not dead-lettered):
            the caller must not apply or commit past the cut, so the next batch starts at the new schema.
        schema_cut_reasons: per table name, why its topic was cut (column, old and new type, offset).
        discovery: ``sample`` when the schema versions were found in the sampler's records alone (the
            decoding checks that no record contradicts them, see :meth:`counts`), ``pass`` when found by
            a pass over every record.
    """

    table_info: dict[TableId, TableInfo]
    transactions: DataFrame
    schema_changes: DataFrame
    #: the counting frames of the records of non-data topics (see :meth:`counts`)
    _categories: list[DataFrame] = field(default_factory=list)
    schema_cuts: dict[tuple[str, int], int] = field(default_factory=dict)
    schema_cut_reasons: dict[str, str] = field(default_factory=dict)
    _staged: list[StagedTopic] = field(default_factory=list)
    #: builds the dead letters of the topics that are not data topics (see :attr:`dead_letters`)
    _other_dead: Callable[[], DataFrame] | None = None
    _persisted: list[DataFrame] = field(default_factory=list)
    discovery: str = "pass"
    _stats: dict[TableId, TableStats] = field(default_factory=dict)
    #: the side outputs' projections that their rows, dead letters and counting frames read (the transaction
    #: topics': :attr:`cdclake.decode.dead_letters.SideOutput.staged`)
    _side_staged: list[DataFrame] = field(default_factory=list)
    _tables: dict[TableId, DataFrame] | None = field(default=None, repr=False)
    _dead_letters: DataFrame | None = field(default=None, repr=False)

    @property
    def tables(self) -> dict[TableId, DataFrame]:
        """Change rows per table (data columns then ``_cdc_*`` metadata columns, see docs/decoding.md)."""
        if self._tables is None:
            self._tables = table_rows(self._staged)
        return self._tables

    @property
    def dead_letters(self) -> DataFrame:
        """Undecodable records: ``topic, partition, offset, key, value, reason``."""
        if self._dead_letters is None:
            if self._other_dead is None:
                raise ValueError("a DecodedBatch needs its other topics' dead letters (other_dead) to list them")
            self._dead_letters = all_dead_letters(self._staged, self._other_dead())
        return self._dead_letters

    def materialise(self, level: StorageLevel | None = None) -> DecodedBatch:
        """Cache each data topic's decoding and the side outputs' projections (at their first use); ``tables`` and
        ``dead_letters`` are built on them from then on.

        The outputs stay lazy DataFrames, but every later use (counts, transaction gathering, apply, dead
        letters) reads the cached rows instead of parsing and converting the records again. A side output's
        rows, dead letters and counting frame were built on its projection: Spark's cache manager substitutes
        the cached rows for it in their plans when they run. Call :meth:`release` when done.

        Returns:
            self.
        """
        if self._persisted or (not self._staged and not self._side_staged) or self._other_dead is None:
            return self

        def persist(frame: DataFrame) -> DataFrame:
            cached = frame.persist(level) if level is not None else frame.persist()
            self._persisted.append(cached)
            return cached

        for side in self._side_staged:
            persist(side)
        for staged in self._staged:
            staged.frame = persist(staged.frame)
        self._tables = self._dead_letters = None  # built again on the cached projections
        return self

    def _bounded_keys(self, staged: StagedTopic) -> tuple[str, ...]:
        """The key columns of a staged topic's table that its decoded rows carry, of a type in
        :data:`BOUNDED_KEY_TYPES`."""
        info = self.table_info.get(staged.table_id)
        if info is None:
            return ()
        return tuple(k for k in bounded_keys(info.key_columns, staged.frame.schema) if k in staged.outputs)

    def table_stats(self, table_id: TableId) -> TableStats | None:
        """The :class:`TableStats` of a table's change rows, observed by :meth:`counts` (None before it)."""
        return self._stats.get(table_id)

    def release(self) -> None:
        """Drop the caches :meth:`materialise` made."""
        for frame in self._persisted:
            frame.unpersist()
        self._persisted.clear()

    def counts(self, key_values: bool = False) -> DecodeCounts:
        """Count every record in one Spark job (:func:`cdclake.decode.counts.count`), which also observes each
        table's :class:`TableStats`, with the least and greatest value of each of its key columns and,
        ``key_values``, their distinct values.

        Every record of the batch is in exactly one category: the data topics' projections give change rows,
        tombstones and dead letters; the other topics' counting frames (built by the decoder) give the rest.

        Raises:
            UnsampledRecordsError: the batch was decoded from a discovery sample that missed some of its
                records (a topic or a schema version); decode it with ``sample_only=False``.
        """
        tables = list(dict.fromkeys(s.table_id for s in self._staged))
        observations = [Observation(f"cdclake-stats-{uuid.uuid4().hex}") for _ in self._staged]
        keys = [self._bounded_keys(s) for s in self._staged]
        frames = [
            *(
                s.categories(tables.index(s.table_id), o, k, key_values)
                for s, o, k in zip(self._staged, observations, keys, strict=True)
            ),
            *self._categories,
        ]
        counts = count(frames, tables)
        parts: dict[TableId, list[TableStats]] = {}
        for staged, observation, k in zip(self._staged, observations, keys, strict=True):
            parts.setdefault(staged.table_id, []).append(TableStats.from_row(observation.get, k, key_values))
        self._stats = {table_id: TableStats.combine(p) for table_id, p in parts.items()}
        return counts
