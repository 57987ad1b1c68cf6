"""Dead letters: the records a batch cannot decode, ``topic, partition, offset, key, value, reason``.

A side output (transactions, schema changes) splits its parsed records into rows and dead letters
(:func:`split`); every record of a topic that cannot be decoded at all is a dead letter (:func:`topic_dead_letters`).
The data topics' dead letters come from their decoding projections (:class:`cdclake.decode.batch.StagedTopic`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdclake.decode.batch import TOMBSTONE, barrier, behind_barrier, unusable
from cdclake.decode.counts import counted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "key", "value", "reason")


class SideOutput(NamedTuple):
    """A side output's rows, dead letters and counting frame (:func:`cdclake.decode.counts.counted`), and the
    projection all three read when it is worth caching (:meth:`cdclake.decode.DecodedBatch.materialise`)."""

    rows: DataFrame
    dead: DataFrame
    categories: DataFrame
    staged: DataFrame | None = None


def dead(frame: DataFrame, reason: Column | str) -> DataFrame:
    """``frame``'s records as dead letters with ``reason``."""
    reason_col = F.lit(reason) if isinstance(reason, str) else reason
    return frame.select(*DEAD_LETTER_COLUMNS[:-1], reason_col.alias("reason"))


def corrupt_or(reason: str) -> Column:
    """``invalid_json`` for a value that is not JSON, else ``reason``."""
    return F.when(F.try_parse_json(F.col("value")).isNull(), F.lit("invalid_json")).otherwise(F.lit(reason))


def split(parsed: DataFrame, reason: Column) -> tuple[DataFrame, Column, Column]:
    """``parsed`` with ``_reason`` (null when usable) and a barrier; returns it and the usable-row and
    dead-letter conditions (a :data:`~cdclake.decode.batch.TOMBSTONE` is neither)."""
    staged = parsed.select("*", reason.alias("_reason"), barrier())
    return staged, behind_barrier(F.col("_reason").isNull()), behind_barrier(unusable(F.col("_reason")))


def categorised(staged: DataFrame, usable: str) -> DataFrame:
    """The counting frame of a :func:`split` frame: ``usable``, tombstones and dead letters."""
    category = (
        F.when(F.col("_reason").isNull(), F.lit(usable))
        .when(F.col("_reason") == F.lit(TOMBSTONE), F.lit("tombstones"))
        .otherwise(F.lit("dead_letters"))
    )
    return counted(staged, category)


def topic_dead_letters(recs: DataFrame, reasons: Mapping[str, str]) -> list[DataFrame]:
    """The records (tombstones aside) of topics that cannot be decoded, per topic with its reason."""
    return [
        dead(recs.where((F.col("topic") == topic) & F.col("value").isNotNull()), corrupt_or(reason))
        for topic, reason in reasons.items()
    ]


def union_dead_letters(recs: DataFrame, frames: list[DataFrame]) -> DataFrame:
    """The union of dead-letter frames (an empty frame of ``recs`` when there are none)."""
    out = dead(recs.where(F.lit(False)), F.lit(None).cast("string"))
    for frame in frames:
        out = out.unionByName(frame)
    return out
