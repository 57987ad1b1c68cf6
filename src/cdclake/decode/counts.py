"""What a decoded batch's records count as (:class:`DecodeCounts`), and the one Spark pass that counts them.

Every record is in exactly one category. Each counting frame gives, per record, its category ``c``, and for a
change row the index ``t`` of its table and its ``op`` (see :func:`counted`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from cdclake.decode.options import TableId
from cdclake.exceptions import UnsampledRecordsError
from cdclake.sql import quote_string

#: The category of change rows.
DATA = "data"

#: The categories always reported besides :data:`DATA`.
COUNTED = (
    "tombstones",
    "heartbeats",
    "notifications_skipped",
    "schema_history_skipped",
    "signals_skipped",
    "watermarks_skipped",
    "transactions",
    "schema_changes",
    "dead_letters",
)

#: The ops of change events.
OPS = ("c", "r", "u", "d", "t", "m")

#: The op a change row without one counts under.
NO_OP = "None"

#: Start of the error a decoding pass raises for a record that a discovery from a sample alone did not
#: foresee (see :class:`cdclake.exceptions.UnsampledRecordsError`).
UNSAMPLED_MARKER = "cdclake-unsampled-records:"


@dataclass(frozen=True)
class DecodeCounts:
    """The counts of a decoded batch.

    Attributes:
        records: records per category: ``data`` (change rows), ``tombstones``, ``heartbeats``,
            ``notifications_skipped``, ``schema_history_skipped``, ``signals_skipped``, ``watermarks_skipped``,
            ``transactions``, ``schema_changes``, ``dead_letters``.
        ops: per data table, its change rows per op (``c``, ``u``, ``d``, ``r``, ``t``, ``m``; ``None`` for a
            row without one); only ops that occur.
    """

    records: Mapping[str, int]
    ops: Mapping[TableId, Mapping[str, int]] = field(default_factory=dict)

    def __getitem__(self, category: str) -> int:
        """The records of ``category`` (0 when none)."""
        return self.records.get(category, 0)

    def table_ops(self, table_id: TableId) -> dict[str, int]:
        """The change rows per op of one table (empty when it has none)."""
        return dict(self.ops.get(table_id, {}))

    def as_dict(self) -> dict[str, int]:
        """The records per category."""
        return dict(self.records)


def counted(frame: DataFrame, category: Column, table: int | None = None, op: Column | None = None) -> DataFrame:
    """A counting frame of ``frame``'s records: ``c`` (the category), ``t`` (the index of a change row's table)
    and ``op`` (a change row's op)."""
    return frame.select(
        category.alias("c"),
        (F.lit(table) if table is not None else F.lit(None)).cast("int").alias("t"),
        (op if op is not None else F.lit(None)).cast("string").alias("op"),
    )


def other_categories(recs: DataFrame, other: dict[str, str], decoded: list[str]) -> DataFrame:
    """The counting frame of every topic not decoded on its own (``other``: topic -> category).

    A record of a topic that discovery did not see (possible only when it discovered from a sample) fails
    the pass with :data:`UNSAMPLED_MARKER`. The filter leaves out the decoded topics, so a source whose reads
    are per topic (Kafka) reads only the other topics here.
    """
    category = F.when(F.col("value").isNull(), F.lit("tombstones"))
    for topic, name in sorted(other.items()):
        category = category.when(F.col("topic") == F.lit(topic), F.lit(name))
    unseen = F.raise_error(
        F.format_string(
            f"{UNSAMPLED_MARKER} topic %s, which the sample did not show (partition %d, offset %d)",
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
        )
    ).cast("string")
    frame = recs.where(~F.col("topic").isin(*decoded)) if decoded else recs
    return counted(frame, category.otherwise(unseen))


def _sql_in(values: Sequence[str]) -> str:
    """``('a', 'b', ...)``: the SQL list of ``values``."""
    return "(" + ", ".join(quote_string(v) for v in values) + ")"


def count(frames: Sequence[DataFrame], tables: Sequence[TableId]) -> DecodeCounts:
    """Count the counting frames in one Spark job, a single stage with no shuffle: the pass over their union
    writes nothing and observes a count per category and per table and op (a category or op it did not
    foresee: a second pass counts by group).

    Args:
        frames: the counting frames (:func:`counted`); observations on them are filled by the same pass.
        tables: the tables their ``t`` indexes.

    Raises:
        UnsampledRecordsError: a record that a discovery from a sample did not foresee (:data:`UNSAMPLED_MARKER`).
    """
    ops = (*OPS, NO_OP)
    keys = [(i, o) for i in range(len(tables)) for o in ops]
    observation = Observation(f"cdclake-counts-{uuid.uuid4().hex}")
    # written as SQL: one call into the driver's JVM per count (a Column built call by call costs about ten)
    data, counted_in, ops_in = quote_string(DATA), _sql_in(COUNTED), _sql_in(ops)
    union = reduce(DataFrame.union, frames).observe(
        observation,
        *[F.expr(f"count_if(c = {quote_string(name)}) AS n{i}") for i, name in enumerate(COUNTED)],
        *[F.expr(f"count_if(c = {data} AND t = {i} AND op = {quote_string(o)}) AS t{i}_{o}") for i, o in keys],
        F.expr(f"count_if(NOT (c IN {counted_in} OR (c = {data} AND op IN {ops_in}))) AS unnamed"),
    )
    try:
        union.write.format("noop").mode("overwrite").save()
    except Exception as exc:  # a Spark error, converted by PySpark (or not, on older builds)
        if UNSAMPLED_MARKER not in str(exc):
            raise
        message = str(exc).split(UNSAMPLED_MARKER, 1)[1].split("SQLSTATE", 1)[0].strip()
        raise UnsampledRecordsError(message) from None
    seen = observation.get
    if seen["unnamed"]:  # a category or an op not foreseen: count them all by group (another pass)
        groups = reduce(DataFrame.union, frames).groupBy("c", "t", "op").agg(F.count(F.lit(1)).alias("n")).collect()
        found = [(row["c"], row["t"], row["op"], int(row["n"])) for row in groups]
    else:
        found = [(name, None, None, int(seen[f"n{i}"])) for i, name in enumerate(COUNTED)]
        found += [(DATA, i, o, int(seen[f"t{i}_{o}"])) for i, o in keys]
    records = dict.fromkeys(COUNTED, 0)
    table_ops: dict[TableId, dict[str, int]] = {}
    for category, table, table_op, n in found:
        if not n:
            continue
        records[category] = records.get(category, 0) + n
        if category == DATA and table is not None:
            per_op = table_ops.setdefault(tables[table], {})
            per_op[table_op] = per_op.get(table_op, 0) + n
    records[DATA] = records.pop(DATA, 0)
    return DecodeCounts(records, table_ops)
