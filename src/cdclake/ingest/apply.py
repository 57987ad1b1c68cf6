"""Pure steps that turn a table's decoded change rows into what is MERGEd, and the MERGE statements.

Order inside a table is ``_cdc_position`` (``array<decimal(38,0)>``, compared lexicographically:
source position, then stream rank, Kafka partition and offset; see docs/decoding.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.decode.batch import BOUNDED_KEY_TYPES, INTEGRAL_KEY_TYPES
from cdclake.decode.columns import KEY, LAKE_META_NAMES
from cdclake.sql import quote_identifier, quote_string

ROW_OPS = ("c", "r", "u", "d")
KEEP = "_keep"
STALE = "_stale"
#: The table holds a row for the event's key (set by :func:`mark_stale`).
IN_TARGET = "_in_target"
#: The tombstone table holds a tombstone of the event's key (set by :func:`mark_stale`).
TOMBSTONED = "_tombstoned"


def position_literal(position: Sequence[int]) -> str:
    """SQL literal of a position, e.g. ``array(CAST(5 AS DECIMAL(38,0)), ...)``."""
    return "array(" + ", ".join(f"CAST({int(p)} AS DECIMAL(38,0))" for p in position) + ")"


#: Up to this many distinct values, a key column's bound lists them (``IN``): Iceberg prunes buckets and files by
#: each of them, and evaluates an ``IN`` against file metrics only up to 200 values.
KEY_VALUES_MAX = 200
#: Above :data:`KEY_VALUES_MAX` values, a key column of an ordered numeric or date type is bounded by up to this
#: many ranges, split at the widest gaps between its values.
KEY_RANGES_MAX = 16
#: Above :data:`KEY_VALUES_MAX` and up to this many values, a key column's bound lists them beside its ranges: the
#: ranges skip files, the list (a hash set in Spark's generated code) leaves only the batch's keys' rows of what the
#: scan reads.
KEY_LIST_MAX = 10_000


@dataclass(frozen=True)
class KeyBound:
    """What a batch's keys say about one key column, as SQL literals (see :func:`key_bounds`): its least and
    greatest value and, when the batch's values were collected, all of them (distinct, in the order of their text),
    ranges that cover them, or both."""

    least: str
    greatest: str
    values: tuple[str, ...] = ()
    ranges: tuple[tuple[str, str], ...] = ()

    def sql(self, column: str) -> str:
        """``column IN (values)`` for up to :data:`KEY_VALUES_MAX` values; else ``(column BETWEEN lo AND hi OR
        ...)`` over the ranges, or ``column BETWEEN least AND greatest``, and ``AND column IN (values)`` when listed."""
        listed = f"{column} IN ({', '.join(self.values)})" if self.values else ""
        if listed and len(self.values) <= KEY_VALUES_MAX:
            return listed
        if len(self.ranges) > 1:
            span = "(" + " OR ".join(f"{column} BETWEEN {lo} AND {hi}" for lo, hi in self.ranges) + ")"
        else:
            span = f"{column} BETWEEN {self.least} AND {self.greatest}"
        return f"{span} AND {listed}" if listed else span


#: The bound of each key column the scans of a batch can be narrowed by (see :func:`key_bounds`).
KeyBounds = Mapping[str, KeyBound]

#: Key types whose values have a difference (:func:`split_ranges`).
_SPACED = (*INTEGRAL_KEY_TYPES, T.DateType, T.DecimalType)


def key_literal(value: Any, data_type: T.DataType) -> str | None:
    """A Spark SQL literal of ``value`` as ``data_type``, for the key types a bound can narrow: integers,
    strings, dates and decimals (:data:`~cdclake.decode.batch.BOUNDED_KEY_TYPES`, ordered the same way by Spark
    and by Iceberg's column metrics); None for a null or any other type."""
    if value is None or not isinstance(data_type, BOUNDED_KEY_TYPES):
        return None
    if isinstance(data_type, INTEGRAL_KEY_TYPES):
        return f"CAST({int(value)} AS {data_type.simpleString()})"
    if isinstance(data_type, T.StringType) and isinstance(value, str):
        return quote_string(value)
    if isinstance(data_type, T.DateType) and isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(data_type, T.DecimalType) and isinstance(value, Decimal):
        return f"CAST('{value:f}' AS {data_type.simpleString()})"
    return None


def split_ranges(values: Sequence[Any], most: int) -> list[tuple[Any, Any]]:
    """``values`` (sorted, distinct, with a difference: integers, dates, decimals) as at most ``most`` ranges
    ``(first, last)`` that cover them, split at the ``most - 1`` widest gaps between neighbours that are wider than
    the narrowest (a run of evenly spaced values stays one range) (pure)."""
    if not values:
        return []
    gaps = {i: values[i] - values[i - 1] for i in range(1, len(values))}
    narrowest = min(gaps.values(), default=None)
    wider = [i for i, gap in gaps.items() if gap > narrowest]
    widest = sorted(wider, key=gaps.__getitem__, reverse=True)[: most - 1]
    starts = [0, *sorted(widest)]
    ends = [*starts[1:], len(values)]
    return [(values[a], values[b - 1]) for a, b in zip(starts, ends, strict=True)]


def key_bounds(
    least: Mapping[str, Any],
    greatest: Mapping[str, Any],
    key_types: Mapping[str, T.DataType],
    values: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, KeyBound]:
    """The bounds of the key columns whose type :func:`key_literal` can write, from a batch's least and
    greatest value of each and, when given, all of its values (pure).

    A stored row whose key is the key of a batch row lies within every bound, so adding the bounds to a scan of
    the table changes no match, and lets Iceberg skip the data files whose partition or column metrics exclude
    them. A range skips the files outside it; up to :data:`KEY_VALUES_MAX` values are listed, which also skips
    the buckets and the files between them; more values of an integer, date or decimal column are covered by up to
    :data:`KEY_RANGES_MAX` ranges (:func:`split_ranges`), which skips the files in the gaps between them, and up to
    :data:`KEY_LIST_MAX` of them are listed beside the ranges (or the one range of another type), which leaves only
    their rows of what the scan reads. A column keeps its one range when one of its values has no literal (a null).
    """
    out = {}
    for name, data_type in key_types.items():
        lo, hi = key_literal(least.get(name), data_type), key_literal(greatest.get(name), data_type)
        if lo is None or hi is None:
            continue
        literals = {v: key_literal(v, data_type) for v in (values or {}).get(name, ())}
        written = {v: literal for v, literal in literals.items() if literal is not None}
        if len(written) < len(literals) or not written:
            out[name] = KeyBound(lo, hi)
        elif len(written) <= KEY_VALUES_MAX:
            out[name] = KeyBound(lo, hi, values=tuple(sorted(written.values())))
        else:
            listed = tuple(sorted(written.values())) if len(written) <= KEY_LIST_MAX else ()
            spans = split_ranges(sorted(written), KEY_RANGES_MAX) if isinstance(data_type, _SPACED) else []
            out[name] = KeyBound(lo, hi, values=listed, ranges=tuple((written[a], written[b]) for a, b in spans))
    return out


def lists_every_key(bounds: KeyBounds, key_columns: Sequence[str]) -> bool:
    """Whether ``bounds`` list the values of every key column: a scan filtered by them returns only the rows of
    the batch's keys (and, for several key columns, of their other combinations)."""
    return all(k in bounds and bounds[k].values for k in key_columns)


def key_range_sql(bounds: KeyBounds, alias: str | None = None) -> str:
    """The conditions of ``bounds`` (:meth:`KeyBound.sql`) on ``alias.k``, joined by ``AND``; ``bounds`` name at
    least one column (callers skip the condition when :func:`key_bounds` found none)."""
    if not bounds:
        raise ValueError("key_range_sql needs the bounds of at least one key column")
    prefix = f"{alias}." if alias else ""
    return " AND ".join(bound.sql(prefix + quote_identifier(k)) for k, bound in bounds.items())


def _on(left: str, right: str, key_columns: Sequence[str], bounds: KeyBounds | None) -> str:
    """The key match of a MERGE's ``ON``, with the target's (``left``) key bounds when given."""
    match = _key_match(left, right, key_columns)
    return f"{match} AND {key_range_sql(bounds, left)}" if bounds else match


def drop_before_truncate(frame: DataFrame, truncated_at: Sequence[int] | None) -> DataFrame:
    """Row events at or before the table's last truncate position are stale."""
    if not truncated_at:
        return frame
    return frame.where(F.col("_cdc_position") > F.expr(position_literal(truncated_at)))


def row_events(frame: DataFrame) -> DataFrame:
    """Only the row-level operations (``c``, ``r``, ``u``, ``d``)."""
    return frame.where(F.col("_cdc_op").isin(*ROW_OPS))


def keep_column_names(frame: DataFrame) -> list[str]:
    """Columns that carry a "keep the stored value" placeholder anywhere in the batch (one small job)."""
    rows = frame.select(F.explode("_cdc_keep_columns").alias("c")).distinct().collect()
    return sorted(r["c"] for r in rows)


#: The metadata columns an upsert's rows carry to the table: what a lake table stores of them (the raw key only
#: where the table has that column).
STORED_META = frozenset((*LAKE_META_NAMES, KEY.name))


def latest_per_key(
    frame: DataFrame, key_columns: Sequence[str], data_columns: Sequence[str], keep_columns: Sequence[str] = ()
) -> DataFrame:
    """The latest row event per key (greatest ``_cdc_position``), placeholders resolved.

    For a column in ``keep_columns`` whose latest event carries the placeholder (unchanged TOAST value),
    the value comes from the latest earlier event of the same key in this batch that carried a real value;
    when there is none, the column is listed in ``_keep`` and the MERGE keeps the stored value.

    Args:
        frame: row events of one table (``c``/``r``/``u``/``d``) with ``_cdc_*`` columns.
        key_columns: primary-key columns.
        data_columns: every data column of the frame.
        keep_columns: columns that may carry placeholders (see :func:`keep_column_names`).

    Returns:
        One row per key: data columns, ``_keep`` (array<string>) and the ``_cdc_*`` columns a lake table stores
        (:data:`STORED_META`); the others (transaction orders, the source block's names, ...) are left out before
        the rows are shuffled by key.
    """
    keys = [F.col(quote_identifier(k)) for k in key_columns]
    resolved = frame
    if keep_columns:
        upto = Window.partitionBy(*keys).orderBy("_cdc_position").rowsBetween(Window.unboundedPreceding, 0)
        for name in keep_columns:
            real = F.when(
                ~F.array_contains("_cdc_keep_columns", name), F.struct(F.col(quote_identifier(name)).alias("v"))
            )
            resolved = resolved.withColumn(f"__last_{name}", F.last(real, ignorenulls=True).over(upto))
        keep_flags = [F.when(F.col(quote_identifier(f"__last_{n}")).isNull(), F.lit(n)) for n in keep_columns]
        resolved = resolved.withColumn(KEEP, F.filter(F.array(*keep_flags), lambda x: x.isNotNull()))
        for name in keep_columns:
            resolved = resolved.withColumn(name, F.col(quote_identifier(f"__last_{name}"))["v"]).drop(f"__last_{name}")
    keep = F.col(KEEP) if keep_columns else F.array().cast("array<string>").alias(KEEP)
    newest = Window.partitionBy(*keys).orderBy(F.col("_cdc_position").desc())
    # one projection, one filter, one projection: each DataFrame call costs the driver an analysis of the plan
    numbered = resolved.select(
        *[F.col(quote_identifier(c)) for c in data_columns],
        keep,
        *[F.col(c) for c in frame.columns if c in STORED_META],
        F.row_number().over(newest).alias("__rn"),
    )
    return numbered.where(F.col("__rn") == 1).drop("__rn")


def mark_stale(
    latest: DataFrame,
    stored: DataFrame | None,
    tombstones: DataFrame | None,
    key_columns: Sequence[str],
    *,
    batch_keys: DataFrame | None = None,
    broadcast_stored: bool = False,
    newer: bool = False,
) -> DataFrame:
    """Add ``_stale`` (the event is not newer than the stored row or the key's delete tombstone),
    ``_in_target`` (the table holds a row for the key) and ``_tombstoned`` (the key has a tombstone).

    A delete whose tombstone is already there (a redo after a crash between the tombstone commit and the
    table's) is stale only once the table no longer holds the key: otherwise the redo deletes the row.

    Args:
        latest: output of :func:`latest_per_key`.
        stored: the lake table's ``key columns + _cdc_position`` (or None: not read, ``_in_target`` false
            throughout; only with ``newer``).
        tombstones: the tombstone table's ``key columns + _cdc_position`` (or None).
        key_columns: primary-key columns.
        batch_keys: the key columns of the batch's events (repeats allowed): when given, ``stored`` and
            ``tombstones`` are first narrowed to them by a broadcast semi-join (the table streams past a hash of
            the keys instead of being shuffled whole); for batches whose keys fit in memory, i.e. when the table
            is much larger than the batch.
        broadcast_stored: ``stored`` and ``tombstones`` are known to be small (narrowed to a small batch's keys
            by ``batch_keys``, or by a scan's list of a single key column's values: at most one row per key): they
            are broadcast to the joins instead of being shuffled with the events (a sort-merge join).
        newer: every event's position is above every stored row's and tombstone's (see
            :func:`cdclake.ingest.tables.position_ceiling`): no event is stale, and ``stored`` and ``tombstones``
            need only the key columns (a scan that decodes no position).
    """
    out = latest
    keys = F.broadcast(batch_keys) if batch_keys is not None else None
    for label, other in (("t", stored), ("x", tombstones)):
        if other is None:
            continue
        # without positions, a stand-in that is not null where the key is stored
        stand_in = F.lit(True) if newer else F.col("_cdc_position")
        renamed = other.select(*[F.col(quote_identifier(k)) for k in key_columns], stand_in.alias(f"__pos_{label}"))
        if keys is not None:
            renamed = renamed.join(keys, on=list(key_columns), how="left_semi")
        if broadcast_stored:
            renamed = F.broadcast(renamed)
        out = out.join(renamed, on=list(key_columns), how="left")
    position = F.col("_cdc_position")
    stored_pos = F.col("__pos_t") if "__pos_t" in out.columns else F.lit(None)
    stale: Column = F.lit(False) if newer else F.coalesce(stored_pos >= position, F.lit(False))
    if "__pos_x" in out.columns and not newer:
        # a tombstone at the event's own position is this delete's, committed before the row's delete (the two
        # tables commit apart): the delete is done only when the table no longer holds the key at an older position
        tomb = F.col("__pos_x")
        stale = (
            stale
            | F.coalesce(tomb > position, F.lit(False))
            | F.coalesce((tomb == position) & stored_pos.isNull(), F.lit(False))
        )
    in_target = F.col("__pos_t").isNotNull() if "__pos_t" in out.columns else F.lit(False)
    tombstoned = F.col("__pos_x").isNotNull() if "__pos_x" in out.columns else F.lit(False)
    return out.select(
        *[F.col(quote_identifier(c)) for c in out.columns if not c.startswith("__pos_")],
        stale.alias(STALE),
        in_target.alias(IN_TARGET),
        tombstoned.alias(TOMBSTONED),
    )


def update_sql(
    target: str,
    source_view: str,
    key_columns: Sequence[str],
    data_columns: Sequence[str],
    target_columns: Sequence[str],
    meta_columns: Sequence[str],
    keep_columns: Sequence[str] = (),
    bounds: KeyBounds | None = None,
    *,
    insert: bool = False,
) -> str:
    """The MERGE of the batch's fresh rows whose key the table already holds; ``insert``: also of the rows whose
    key it does not hold (:func:`upsert_insert_sql`).

    The rows are those :func:`mark_stale` found newer than the stored row (under the source's lock, which every
    writer of the table holds: nothing changes a stored position between the marking and this MERGE), so it
    does not compare positions again: that would decode every scanned row's ``_cdc_position``, an array of
    decimals (the table's scan reads the key columns, the placeholder columns and the rows' file positions only).

    Only ``WHEN MATCHED`` clauses: Spark plans it as an inner join, which can broadcast the batch and
    stream the table past it (a MERGE with ``WHEN NOT MATCHED`` is an outer join that shuffles the
    whole table). Rows for keys the table does not hold are appended instead (:func:`insert_frame`).
    Columns of the target that the batch does not carry (a column dropped at the source) are set to
    null from then on. Columns listed in ``s._keep`` keep the stored value; only ``keep_columns`` (those
    that carry a placeholder somewhere in the batch) are tested, so the table's other data columns are
    not read. ``bounds`` (:func:`key_bounds` of the batch) narrow the table's scan to the batch's keys.
    """
    on = _on("t", "s", key_columns, bounds)
    carried = set(data_columns)
    keep = set(keep_columns)
    sets = []
    for name in target_columns:
        if name in key_columns:
            continue
        column = quote_identifier(name)
        if name in meta_columns:
            expr = "current_timestamp()" if name == "_cdc_ingested_at" else f"s.{column}"
        elif name in keep:
            expr = f"CASE WHEN array_contains(s.{KEEP}, {quote_string(name)}) THEN t.{column} ELSE s.{column} END"
        elif name in carried:
            expr = f"s.{column}"
        else:
            expr = "NULL"
        sets.append(f"t.{column} = {expr}")
    sql = (
        f"MERGE INTO {target} t USING {source_view} s ON {on}\n"
        "WHEN MATCHED AND s._cdc_op = 'd' THEN DELETE\n"
        f"WHEN MATCHED THEN UPDATE SET {', '.join(sets)}"
    )
    return (sql + "\n" + upsert_insert_sql(data_columns, target_columns, meta_columns)) if insert else sql


def upsert_insert_sql(data_columns: Sequence[str], target_columns: Sequence[str], meta_columns: Sequence[str]) -> str:
    """A MERGE's clause that inserts the non-delete rows of keys the table does not hold, shaped as
    :func:`insert_frame` shapes an append's: ``_cdc_ingested_at`` now, columns the rows do not carry null."""
    carried = {*data_columns, *meta_columns}
    names, values = [], []
    for name in target_columns:
        column = quote_identifier(name)
        names.append(column)
        if name == "_cdc_ingested_at":
            values.append("current_timestamp()")
        else:
            values.append(f"s.{column}" if name in carried else "NULL")
    return f"WHEN NOT MATCHED AND s._cdc_op <> 'd' THEN INSERT ({', '.join(names)}) VALUES ({', '.join(values)})"


def insert_frame(rows: DataFrame, target_schema: T.StructType, data_columns: Sequence[str]) -> DataFrame:
    """``rows`` shaped as the table's rows, for an append: ``_cdc_ingested_at`` now, columns of the target
    that the rows do not carry null, other columns dropped.

    An upsert table appends the fresh non-delete events of keys it does not hold (see :func:`mark_stale`):
    a placeholder column without a value in the batch has nothing stored to keep, so it is null.
    """
    carried = set(data_columns) | {c for c in rows.columns if c.startswith("_cdc_")}
    types = {f.name: f.dataType for f in rows.schema.fields}
    cols = []
    for fld in target_schema.fields:
        if fld.name == "_cdc_ingested_at":
            cols.append(F.current_timestamp().alias(fld.name))
        elif fld.name in carried and types.get(fld.name) == fld.dataType:
            cols.append(F.col(quote_identifier(fld.name)))  # no cast to build: a Column costs a call per step
        elif fld.name in carried:
            cols.append(F.col(quote_identifier(fld.name)).cast(fld.dataType).alias(fld.name))
        else:
            cols.append(F.lit(None).cast(fld.dataType).alias(fld.name))
    return rows.select(*cols)


def tombstone_merge_sql(
    target: str, source_view: str, key_columns: Sequence[str], bounds: KeyBounds | None = None
) -> str:
    """Advance the delete tombstone of every key deleted again in ``source_view`` (the deletes' key columns and
    ``_cdc_position``) to the newer delete's position.

    The upsert MERGEs only the deletes of keys that had a tombstone when the batch marked its events
    (``_tombstoned``); the others' tombstones are new and appended (:func:`tombstone_rows`). Every key of the
    view still has its tombstone here: nothing removes one between the marking and this MERGE (the maintenance
    job's expiry runs while it holds the source's lock, which the batch holds; a truncate's deletes come before
    the marking). So only ``WHEN MATCHED``: an inner join that can broadcast the deletes and stream the side
    table past them. ``bounds``: as in :func:`update_sql`.
    """
    on = _on("d", "x", key_columns, bounds)
    return (
        f"MERGE INTO {target} d USING {source_view} x ON {on}\n"
        "WHEN MATCHED AND x._cdc_position > d._cdc_position THEN UPDATE SET "
        "d._cdc_position = x._cdc_position, d._cdc_deleted_at = current_timestamp()"
    )


def tombstone_rows(deletes: DataFrame, key_columns: Sequence[str]) -> DataFrame:
    """The tombstone table's rows of ``deletes`` (delete events): key columns, position, ingest time now."""
    return deletes.select(
        *[F.col(quote_identifier(k)) for k in key_columns],
        F.col("_cdc_position"),
        F.current_timestamp().alias("_cdc_deleted_at"),
    )


def _key_match(left: str, right: str, key_columns: Sequence[str]) -> str:
    """``left.k = right.k AND ...`` over the key columns."""
    return " AND ".join(f"{left}.{quote_identifier(k)} = {right}.{quote_identifier(k)}" for k in key_columns)


def delete_older_sql(target: str, doomed_view: str, key_columns: Sequence[str], position: Sequence[int]) -> str:
    """Delete the rows of ``target`` whose key is in ``doomed_view`` and whose ``_cdc_position`` is older than
    ``position`` (a truncate)."""
    literal = position_literal(position)
    return (
        f"MERGE INTO {target} t USING {doomed_view} d ON {_key_match('t', 'd', key_columns)} "
        f"WHEN MATCHED AND t._cdc_position < {literal} THEN DELETE"
    )


def close_versions_sql(target: str, open_view: str, key_columns: Sequence[str], position: Sequence[int]) -> str:
    """Close, at ``position`` (a truncate), the current version of every key in ``open_view`` (history mode)."""
    literal = position_literal(position)
    return (
        f"MERGE INTO {target} t USING {open_view} o ON {_key_match('t', 'o', key_columns)} AND t._cdc_is_current "
        f"WHEN MATCHED THEN UPDATE SET t._cdc_valid_to = {literal}, t._cdc_is_current = false"
    )


SCD2_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_cdc_valid_from", "ARRAY<DECIMAL(38,0)>"),
    ("_cdc_valid_to", "ARRAY<DECIMAL(38,0)>"),
    ("_cdc_is_current", "BOOLEAN"),
)


def scd2_versions(
    events: DataFrame,
    stored_current: DataFrame,
    key_columns: Sequence[str],
    data_columns: Sequence[str],
    keep_columns: Sequence[str],
) -> DataFrame:
    """History versions of a batch: one per non-delete event, closed by the key's next event.

    Args:
        events: fresh row events (not older than anything stored for their key).
        stored_current: the table's current versions (key columns + data columns).
        key_columns: primary-key columns.
        data_columns: data columns.
        keep_columns: columns that may carry a TOAST placeholder.

    Returns:
        data columns, ``_cdc_*`` columns, ``_cdc_valid_from``, ``_cdc_valid_to``, ``_cdc_is_current``;
        a placeholder takes the value of the key's previous version (in the batch or stored).
    """
    keys = [F.col(quote_identifier(k)) for k in key_columns]
    ordered = Window.partitionBy(*keys).orderBy("_cdc_position")
    upto = ordered.rowsBetween(Window.unboundedPreceding, 0)
    frame = events.withColumn("_cdc_valid_to", F.lead("_cdc_position").over(ordered))
    if keep_columns:
        current = stored_current.select(
            *keys, *[F.col(quote_identifier(c)).alias(f"__stored_{c}") for c in keep_columns]
        )
        frame = frame.join(current, on=list(key_columns), how="left")
        for name in keep_columns:
            real = F.when(
                ~F.array_contains("_cdc_keep_columns", name), F.struct(F.col(quote_identifier(name)).alias("v"))
            )
            last = F.last(real, ignorenulls=True).over(upto)["v"]
            frame = frame.withColumn(
                name,
                F.when(
                    F.array_contains("_cdc_keep_columns", name),
                    F.coalesce(last, F.col(quote_identifier(f"__stored_{name}"))),
                ).otherwise(F.col(quote_identifier(name))),
            ).drop(f"__stored_{name}")
    return (
        frame.where(F.col("_cdc_op") != "d")
        .withColumn("_cdc_valid_from", F.col("_cdc_position"))
        .withColumn("_cdc_is_current", F.col("_cdc_valid_to").isNull())
    )


def scd2_merge_sql(
    target: str,
    versions_view: str,
    closes_view: str,
    key_columns: Sequence[str],
    target_columns: Sequence[str],
    carried: Sequence[str],
) -> str:
    """One atomic MERGE: close the current version of every key changed in the batch, insert the new versions.

    ``closes_view`` has the key columns and ``_close_at`` (the key's first position in the batch);
    ``versions_view`` has the new versions. The two are unioned with a ``_merge_key`` that only the
    close rows carry, so versions never match and are inserted.
    """
    on = " AND ".join(f"t.{quote_identifier(k)} = s.{quote_identifier('_mk_' + k)}" for k in key_columns)
    close_keys = ", ".join(f"{quote_identifier(k)} AS {quote_identifier('_mk_' + k)}" for k in key_columns)
    null_keys = ", ".join(f"NULL AS {quote_identifier('_mk_' + k)}" for k in key_columns)
    carried_set = set(carried)
    cols = list(target_columns)
    version_select = ", ".join(
        ("current_timestamp()" if c == "_cdc_ingested_at" else (quote_identifier(c) if c in carried_set else "NULL"))
        + f" AS {quote_identifier(c)}"
        for c in cols
    )
    close_select = ", ".join(f"NULL AS {quote_identifier(c)}" for c in cols)
    inserts = ", ".join(quote_identifier(c) for c in cols)
    values = ", ".join(f"s.{quote_identifier(c)}" for c in cols)
    return (
        f"MERGE INTO {target} t USING (\n"
        f"  SELECT 'close' AS _kind, {close_keys}, _close_at, {close_select} FROM {closes_view}\n"
        f"  UNION ALL\n"
        f"  SELECT 'version' AS _kind, {null_keys}, NULL AS _close_at, {version_select} FROM {versions_view}\n"
        f") s ON {on} AND t._cdc_is_current\n"
        "WHEN MATCHED AND s._kind = 'close' THEN UPDATE SET t._cdc_valid_to = s._close_at, t._cdc_is_current = false\n"
        f"WHEN NOT MATCHED AND s._kind = 'version' THEN INSERT ({inserts}) VALUES ({values})"
    )
