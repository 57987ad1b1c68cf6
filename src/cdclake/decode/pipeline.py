"""``decode_records``: Kafka records of Debezium topics -> typed change rows per table plus side outputs.

Plan (one small driver-side discovery job, then lazy DataFrames):

1. Normalise the input to string key/value (:func:`cdclake.decode.records.normalise_records`).
2. Discovery: group by (topic, hash of the embedded Connect schema) and collect counts plus sample records to the
   driver. Samples classify each topic (data / transaction / schema change / heartbeat) and give the table
   identity, the connector and the Connect schemas (merged by column name across versions). With
   ``sample_only``, a conclusive sample replaces the aggregation and the decoding pass checks it
   (:func:`_discover_sample`, :func:`decode_counted`).
3. Per data topic: one call of the JVM envelope decoder (:mod:`cdclake.decode.jvm`) per record, planned from the
   merged Connect schema: it parses the record, converts every value to its Spark type and says why a record is
   unusable; rows that fail go to ``dead_letters`` with that reason. Schema change topics go through the same
   decoder; transaction topics through ``from_json``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.decode.batch import (
    RAW_RECORD,
    TOMBSTONE,
    TOPIC_OUTPUT,
    UNSAMPLED_MARKER,
    DecodedBatch,
    StagedTopic,
    TableInfo,
    assemble,
    behind_barrier,
    column,
    unusable,
)
from cdclake.decode.connect import RowPlan, merge_fields, plan_row, plan_type
from cdclake.decode.jvm import decode_call, output_type
from cdclake.decode.options import DecodeOptions, RecordFormat, TableId
from cdclake.decode.records import RecordSampler, normalise_records
from cdclake.dialects import Dialect, get_dialect
from cdclake.exceptions import ConfigError, ConnectSchemaError, UnsampledRecordsError, UnsupportedDialectError

if TYPE_CHECKING:
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

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
DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "key", "value", "reason")


# -- small expression helpers ---------------------------------------------------------------------------------------


def _long(column: Column) -> Column:
    return column.try_cast("long")


def _header(name: str) -> Column:
    # first header with this key; no lambda (higher-order functions would switch the projection to interpreted mode)
    index = F.array_position(F.col("headers.key"), F.lit(name))
    return F.get(F.col("headers.value"), (index - F.lit(1)).cast("int")).cast("string")


def _corrupt_reason(parsed: Column) -> Column:
    return F.when(F.try_parse_json(F.col("value")).isNull(), F.lit("invalid_json")).otherwise(F.lit("type_mismatch"))


def _barrier() -> Column:
    """A free nondeterministic column: a filter above the projection holding it is not pushed below it."""
    return F.spark_partition_id().alias("_barrier")


def _split(parsed: DataFrame, reason: Column) -> tuple[DataFrame, Column, Column]:
    """``parsed`` with ``_reason`` (null when usable) and a barrier; returns it and the usable-row and
    dead-letter conditions (a :data:`TOMBSTONE` is neither)."""
    staged = parsed.select("*", reason.alias("_reason"), _barrier())
    return staged, behind_barrier(F.col("_reason").isNull()), behind_barrier(unusable(F.col("_reason")))


def _categorised(staged: DataFrame, usable: str) -> DataFrame:
    """What :meth:`DecodedBatch.counts` counts each record of a :func:`_split` frame as."""
    return staged.select(
        F.when(F.col("_reason").isNull(), F.lit(usable))
        .when(F.col("_reason") == F.lit(TOMBSTONE), F.lit("tombstones"))
        .otherwise(F.lit("dead_letters"))
        .alias("c")
    )


def _dead(frame: DataFrame, reason: Column | str) -> DataFrame:
    reason_col = F.lit(reason) if isinstance(reason, str) else reason
    return frame.select("topic", "partition", "offset", "key", "value", reason_col.alias("reason"))


# -- discovery ------------------------------------------------------------------------------------------------------


@dataclass
class _Group:
    topic: str
    schema_hash: int | None
    records: int
    tombstones: int
    last_offset: int
    samples: list[Any]
    key_sample: Any
    partition: int = 0
    first_offset: int = 0
    first_ts: Any = None


@dataclass
class _Topic:
    name: str
    groups: list[_Group] = field(default_factory=list)
    #: sampled schema texts with their delimiter (see :func:`_known_schemas`)
    prefixes: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(g.records for g in self.groups)

    @property
    def tombstones(self) -> int:
        return sum(g.tombstones for g in self.groups)


#: (start, delimiter) of the layouts whose schema text is a byte slice: the JsonConverter's compact JSON, and
#: Python's ``json.dumps`` default separators (hand-made or re-serialised dumps).
_SCHEMA_LAYOUTS = (
    ('{"' + f.SCHEMA + '":{', ',"' + f.PAYLOAD + '":'),
    ('{"' + f.SCHEMA + '": {', ', "' + f.PAYLOAD + '": '),
)


def _schema_text(value: Column) -> Column:
    """The text of the embedded Connect schema: the JsonConverter writes ``{"schema":{...},"payload":...}``.

    The fast path is everything before the first ``,"payload":`` (``substring_index`` slices bytes; ``locate`` +
    ``substring`` would count characters through kilobytes of schema per record). The first occurrence is
    structural: inside JSON strings the quotes are escaped, and the schema's own keys are fixed names. Records
    in another layout (see :data:`_SCHEMA_LAYOUTS`) fall back to ``get_json_object``, several times slower.
    """
    text = F.when(F.lit(False), F.lit(None).cast("string"))
    for matches, schema_text, _ in _layout_slices(value):
        text = text.when(matches, schema_text)
    return text.otherwise(F.get_json_object(value, "$." + f.SCHEMA))


def _layout_slices(value: Column) -> list[tuple[Column, Column, str]]:
    """Per layout of :data:`_SCHEMA_LAYOUTS`: (the record is in it, its schema text, the delimiter after it)."""
    out = []
    for start, delimiter in _SCHEMA_LAYOUTS:
        fast = F.substring_index(value, delimiter, 1)
        out.append((value.startswith(F.lit(start)) & (F.octet_length(fast) < F.octet_length(value)), fast, delimiter))
    return out


def _schema_prefix_text(value: str) -> str | None:
    """:func:`_schema_prefix` of one record's text, in the driver."""
    for start, delimiter in _SCHEMA_LAYOUTS:
        if value.startswith(start):
            end = value.find(delimiter)
            if end >= 0:
                return value[: end + len(delimiter)]
    return None


def _schema_prefix(value: Column) -> Column:
    """The record's schema text and the delimiter after it (what the envelope decoder skips), or null
    for a record in no layout of :data:`_SCHEMA_LAYOUTS`."""
    prefix = F.when(F.lit(False), F.lit(None).cast("string"))
    for matches, schema_text, delimiter in _layout_slices(value):
        prefix = prefix.when(matches, F.concat(schema_text, F.lit(delimiter)))
    return prefix


#: Discovery samples records whose offset is a multiple of this (see :func:`_known_schemas`).
_SAMPLE_EVERY = 512


def _known_schemas(recs: DataFrame, sampler: RecordSampler | None = None) -> dict[str, list[tuple[str, int]]]:
    """Schema texts seen in a sample of the records, per topic: ``(text + delimiter, fingerprint)``.

    The sample is ``sampler.spread()``, or else the records whose offset is a multiple of
    :data:`_SAMPLE_EVERY` (every partition's first record when its range starts at 0), so a large topic is
    almost surely sampled; a schema version outside the sample costs what it costs (its records are hashed).
    """
    value = F.col("value")
    layout = _schema_prefix(value)
    sample = (
        normalise_records(sampler.spread())
        if sampler is not None
        else recs.where(F.col("offset") % F.lit(_SAMPLE_EVERY) == F.lit(0))
    )
    rows = (
        sample.where(value.isNotNull())
        .select("topic", layout.alias("prefix"), F.xxhash64(_schema_text(value)).alias("fingerprint"))
        .where(F.col("prefix").isNotNull())
        .distinct()
        .collect()
    )
    known: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in rows:
        known[row["topic"]].append((row["prefix"], int(row["fingerprint"])))
    return dict(known)


def _fingerprint(value: Column, known: dict[str, list[tuple[str, int]]]) -> Column:
    """``xxhash64`` of the record's schema text (:func:`_schema_text`), fast for schemas in ``known``.

    A record that starts with a known schema text followed by its delimiter has exactly that schema
    text (the delimiter's first occurrence is where the text ends), so its fingerprint is the known one:
    a byte comparison instead of a search for the delimiter and a hash of kilobytes of schema.
    """
    expr = F.when(F.lit(False), F.lit(None).cast("long"))
    for topic, entries in sorted(known.items()):
        for prefix, fingerprint in entries:
            expr = expr.when(
                (F.col("topic") == F.lit(topic)) & value.startswith(F.lit(prefix)), F.lit(fingerprint).cast("long")
            )
    return expr.otherwise(F.xxhash64(_schema_text(value)))


def _discover(recs: DataFrame, options: DecodeOptions, sampler: RecordSampler | None = None) -> dict[str, _Topic]:
    """Per (topic, schema version): counts and the offsets of sample records, then the samples themselves.

    Two cheap jobs: a hash aggregation over fixed-width values only (no record text in the aggregation buffers,
    which would force a sort-based aggregation over every record), then a lookup of the few sample records
    (a small read with ``sampler``, else a filter over the records).
    """
    value = F.col("value")
    known: dict[str, list[tuple[str, int]]] = {}
    schema_hash = F.lit(None).cast("long")
    if options.value_schemas_enabled:
        known = _known_schemas(recs, sampler)
        schema_hash = _fingerprint(value, known)
    json_offset = F.when(value.startswith("{"), F.col("offset"))
    key_offset = F.when(F.col("key").isNotNull() & value.isNotNull(), F.col("offset"))
    rows = (
        recs.groupBy("topic", schema_hash.alias("schema_hash"), F.col("partition").alias("group_partition"))
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.min("offset").alias("first_offset"),
            F.min("timestamp").alias("first_ts"),
            F.sum(value.isNull().cast("long")).alias("tombstones"),
            F.max("offset").alias("last_offset"),
            F.max_by(F.col("partition"), json_offset).alias("last_partition"),
            F.max(json_offset).alias("last_json"),
            F.min_by(F.col("partition"), json_offset).alias("first_partition"),
            F.min(json_offset).alias("first_json"),
            F.max_by(F.col("partition"), key_offset).alias("key_partition"),
            F.max(key_offset).alias("key_offset"),
        )
        .collect()
    )
    wanted: set[tuple[str, int, int]] = set()
    for row in rows:
        for part, off in (
            (row["last_partition"], row["last_json"]),
            (row["first_partition"], row["first_json"]),
            (row["key_partition"], row["key_offset"]),
        ):
            if off is not None:
                wanted.add((row["topic"], int(part), int(off)))
    samples: dict[tuple[str, int, int], Any] = {}
    if wanted:
        point = F.struct(F.col("topic"), F.col("partition").cast("int"), F.col("offset").cast("long"))
        wanted_lit = [F.struct(F.lit(t), F.lit(p), F.lit(o).cast("long")) for t, p, o in sorted(wanted)]
        lookup = normalise_records(sampler.at(sorted(wanted))) if sampler is not None else recs
        for sample in (
            lookup.where(point.isin(*wanted_lit)).select("topic", "partition", "offset", "key", "value").collect()
        ):
            samples[(sample["topic"], int(sample["partition"]), int(sample["offset"]))] = sample

    topics: dict[str, _Topic] = {}
    for row in rows:
        texts = []
        for part, off in ((row["last_partition"], row["last_json"]), (row["first_partition"], row["first_json"])):
            sample = samples.get((row["topic"], int(part), int(off))) if off is not None else None
            texts.append(_loads(sample["value"]) if sample is not None else None)
        key_row = (
            samples.get((row["topic"], int(row["key_partition"]), int(row["key_offset"])))
            if row["key_offset"] is not None
            else None
        )
        topics.setdefault(row["topic"], _Topic(row["topic"])).groups.append(
            _Group(
                row["topic"],
                row["schema_hash"],
                int(row["records"]),
                int(row["tombstones"] or 0),
                int(row["last_offset"] or 0),
                [t for t in texts if t is not None],
                _loads(key_row["key"]) if key_row is not None else None,
                int(row["group_partition"]),
                int(row["first_offset"]),
                row["first_ts"],
            )
        )
    for topic in topics.values():
        topic.prefixes = [prefix for prefix, _ in known.get(topic.name, [])]
        # schema versions in the order they appeared: Kafka timestamp of their first record, then offset
        first_seen: dict[int | None, tuple[Any, int]] = {}
        for g in topic.groups:
            seen = (g.first_ts is None, g.first_ts or 0, g.first_offset)
            first_seen[g.schema_hash] = min(first_seen.get(g.schema_hash, seen), seen)
        topic.groups.sort(key=lambda g: (first_seen[g.schema_hash], g.partition))
    return topics


def _discover_sample(sampler: RecordSampler, options: DecodeOptions) -> dict[str, _Topic] | None:
    """Discovery from the sampler's records alone (one small read, no pass over the batch), or None.

    The sample is conclusive, and the topics are returned, when every topic in it (heartbeat topics aside)
    shows a record that classifies it and, with schemas on, one schema version in the JsonConverter layout.
    Otherwise None: the caller discovers by a pass (:func:`_discover`). What a sample cannot show, a topic
    or a schema version seen in no sampled record, is checked by the decoding itself
    (:data:`UNSAMPLED_MARKER`, see :meth:`DecodedBatch.counts`). A sampled group's ``records`` and
    ``tombstones`` count the sample, not the batch. The sample is read in the driver
    (:meth:`RecordSampler.spread_rows`): no Spark job when the sampler reads its source itself.
    """
    schemas = options.value_schemas_enabled
    rows = []
    for record in sampler.spread_rows():
        prefix = _schema_prefix_text(record.value) if record.value is not None else None
        # the schema version's label within this sample (the sample's versions are never mixed with a pass's)
        digest = hashlib.blake2b(prefix.encode(), digest_size=8).digest() if prefix is not None else None
        rows.append(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": record.key,
                "value": record.value,
                "prefix": prefix,
                "fingerprint": int.from_bytes(digest, "big", signed=True) if digest is not None else None,
            }
        )
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        by_topic[row["topic"]].append(row)
    topics: dict[str, _Topic] = {}
    for name, topic_rows in sorted(by_topic.items()):
        values = [r for r in topic_rows if r["value"] is not None]
        parsed = {id(r): _loads(r["value"]) for r in values}
        if not name.startswith(f.HEARTBEAT_TOPIC_PREFIX):
            payloads = [_unwrap(parsed[id(r)], schemas)[0] for r in values]
            if not any(p is not None and _classify(name, p) for p in payloads):
                return None  # only tombstones or unclassifiable records in the sample
            if schemas and (any(r["prefix"] is None for r in values) or len({r["fingerprint"] for r in values}) != 1):
                return None  # several schema versions (or another layout): their order needs the pass
        topic = _Topic(name, prefixes=sorted({r["prefix"] for r in values if r["prefix"] is not None}))
        fingerprint = values[0]["fingerprint"] if schemas and values else None
        for partition in sorted({r["partition"] for r in topic_rows}):
            part = sorted((r for r in topic_rows if r["partition"] == partition), key=lambda r: r["offset"])
            keyed = [r for r in part if r["key"] is not None and r["value"] is not None]
            topic.groups.append(
                _Group(
                    name,
                    fingerprint,
                    len(part),
                    sum(r["value"] is None for r in part),
                    part[-1]["offset"],
                    [parsed[id(r)] for r in reversed(part) if r["value"] is not None and parsed[id(r)] is not None],
                    _loads(keyed[-1]["key"]) if keyed else None,
                    int(partition),
                    part[0]["offset"],
                    part[0]["timestamp"],
                )
            )
        topics[name] = topic
    return topics or None


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _unwrap(sample: Any, schemas: bool) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    if not isinstance(sample, dict):
        return None, None
    if schemas and f.PAYLOAD in sample:
        payload, schema = sample.get(f.PAYLOAD), sample.get(f.SCHEMA)
        return (payload if isinstance(payload, dict) else None), (schema if isinstance(schema, dict) else None)
    return sample, None


_NOTIFICATION_TOPIC_SUFFIX = ".notifications"
_SCHEMA_HISTORY_TOPIC_SUFFIX = ".schema-history"
_NOTIFICATION_FIELDS = ("id", "type", "aggregate_type")


def _classify(topic: str, payload: dict[str, Any]) -> str | None:
    if topic.endswith(f.TRANSACTION_TOPIC_SUFFIX) and f.TX_STATUS in payload:
        return "transaction"
    if f.OP in payload or f.AFTER in payload or f.BEFORE in payload:
        return "data"
    if all(k in payload for k in _NOTIFICATION_FIELDS):
        # io.debezium.connector.common.Notification (sink channel, topic <prefix>.notifications)
        return "notification"
    source = payload.get(f.SOURCE)
    if (f.SC_DDL in payload or f.SC_TABLE_CHANGES in payload) and (
        topic.endswith(_SCHEMA_HISTORY_TOPIC_SUFFIX)
        or (isinstance(payload.get("position"), dict) and isinstance(source, dict) and "server" in source)
    ):
        # the connector's internal schema history (raw JSON, never wrapped in schema/payload): not for consumers
        return "schema_history"
    if f.TX_STATUS in payload and f.TX_ID in payload:
        return "transaction"
    if f.SC_DDL in payload or f.SC_TABLE_CHANGES in payload or f.SC_DATABASE_NAME in payload:
        return "schema_change"
    return None


def _infer_connector(source: dict[str, Any]) -> str | None:
    if source.get(f.SRC_CONNECTOR):
        return str(source[f.SRC_CONNECTOR])
    if f.SRC_FILE in source:
        return "mysql"
    if f.SRC_COMMIT_LSN in source:
        return "informix"
    if f.SRC_ORD in source:
        return "mongodb"
    if f.SRC_LSN in source:
        return "postgresql"
    return None


# -- data topics ----------------------------------------------------------------------------------------------------


@dataclass
class _DataTopic:
    topic: str
    table_id: TableId
    dialect: Dialect
    plan: RowPlan | None
    key_columns: tuple[str, ...]
    versions: int
    signal: bool
    keep_hashes: tuple[int | None, ...] | None = None  # decode only records of these schema versions
    cuts: dict[tuple[str, int], int] = field(default_factory=dict)
    cut_reason: str | None = None
    prefixes: tuple[str, ...] = ()  # sampled schema texts + delimiter: the decoder skips them (see cdclake.decode.jvm)


def _row_fields_from_schema(schema: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    for fld in (schema or {}).get(f.SCHEMA_FIELDS) or []:
        if fld.get(f.SCHEMA_FIELD) in (f.AFTER, f.BEFORE) and fld.get(f.SCHEMA_TYPE) == "struct":
            return list(fld.get(f.SCHEMA_FIELDS) or [])
    return None


def _key_columns(key: Any, schemas: bool) -> tuple[str, ...]:
    if not isinstance(key, dict):
        return ()
    if schemas and isinstance(key.get(f.SCHEMA), dict):
        return tuple(fld[f.SCHEMA_FIELD] for fld in key[f.SCHEMA].get(f.SCHEMA_FIELDS) or [])
    payload = key.get(f.PAYLOAD, key) if schemas else key
    return tuple(payload) if isinstance(payload, dict) else ()


def _parse(frame: DataFrame, wire: T.StructType, schemas: bool) -> tuple[DataFrame, Column]:
    """Parse ``value`` once with ``from_json`` (transaction topics); returns the frame with ``_j`` and the
    column of the payload inside it."""
    value = F.col("value")
    if schemas:
        schema = T.StructType([T.StructField(f.PAYLOAD, wire), T.StructField(_CORRUPT, _S)])
    else:
        schema = T.StructType([*wire.fields, T.StructField(_CORRUPT, _S)])
    # The parse is a projection of its own. The optimizer does not inline it into the projection above (an
    # expensive expression referenced many times is never collapsed), but it would push a filter on the parsed
    # fields below it, substituting ``from_json`` into every field the filter reads: every caller therefore
    # filters above a projection holding a nondeterministic barrier (:func:`_barrier`). Pinned by the plan test
    # in tests/unit/decode/test_plan.py (one parse per topic). A Generate node (``explode(array(...))``) would
    # be a barrier too, but it breaks whole-stage codegen and copies every parsed row: 30% slower.
    parsed = frame.select("*", F.from_json(value, schema, _JSON_OPTIONS).alias("_j"))
    env = F.col("_j." + f.PAYLOAD) if schemas else F.col("_j")
    return parsed, env


#: The metadata columns of a change row, in the output contract's order (docs/decoding.md): each with the envelope
#: decoder's output it comes from, or None for the record's own (Kafka coordinates, headers, key).
_META_COLUMNS: tuple[tuple[str, str | None], ...] = (
    ("_cdc_op", "op"), ("_cdc_position", "position"), ("_cdc_source_ts", "source_ts"), ("_cdc_tx_id", "tx_id"),
    ("_cdc_tx_total_order", "tx_total_order"), ("_cdc_tx_data_collection_order", "tx_data_collection_order"),
    (TOPIC_OUTPUT, None), ("_cdc_partition", None), ("_cdc_offset", None), ("_cdc_kafka_ts", None),
    ("_cdc_snapshot", "snapshot"), ("_cdc_connector", "connector"), ("_cdc_db", "db"), ("_cdc_schema", "schema"),
    ("_cdc_table", "table"), ("_cdc_keep_columns", "keep_columns"), ("_cdc_old_key", None), ("_cdc_new_key", None),
)  # fmt: skip
#: MongoDB's partial updates (a document store's change rows)
_DOCUMENT_COLUMNS = (
    ("_cdc_before", "before"), ("_cdc_patch", "patch"), ("_cdc_filter", "filter"),
    ("_cdc_updated_fields", "updated_fields"), ("_cdc_removed_fields", "removed_fields"),
    ("_cdc_truncated_arrays", "truncated_arrays"),
)  # fmt: skip
#: PostgreSQL's logical decoding messages (``op = m``)
_MESSAGE_COLUMNS = (("_cdc_message_prefix", "message_prefix"), ("_cdc_message_content", "message_content"))


def _record_column(name: str) -> Column:
    """A metadata column of :data:`_META_COLUMNS` that comes from the record itself."""
    if name == "_cdc_old_key":
        return _header(f.HEADER_OLD_KEY)
    if name == "_cdc_new_key":
        return _header(f.HEADER_NEW_KEY)
    return F.col({TOPIC_OUTPUT: "topic", "_cdc_partition": "partition", "_cdc_offset": "offset",
                  "_cdc_kafka_ts": "timestamp", "_cdc_key": "key"}[name])  # fmt: skip


def _meta_columns(dt: _DataTopic, options: DecodeOptions) -> list[tuple[str, str | None]]:
    """The metadata columns of a data topic's change rows (see :data:`_META_COLUMNS`)."""
    columns = list(_META_COLUMNS)
    if options.include_key:
        columns.append(("_cdc_key", None))
    if dt.dialect.document_store:
        columns += _DOCUMENT_COLUMNS
    elif dt.plan is not None and options.include_before:
        columns.append(("_cdc_before", "before"))
    if dt.dialect.has_unavailable_placeholder:
        columns += _MESSAGE_COLUMNS
    return columns


def _data_plan(dt: _DataTopic, options: DecodeOptions, sampled: bool) -> tuple[dict[str, Any], T.StructType]:
    """The envelope decoder's plan of a data topic and the struct it returns (see :mod:`cdclake.decode.jvm`)."""
    dialect, plan = dt.dialect, dt.plan
    outputs = ["document"] if dialect.document_store else ["data"]
    outputs += [name for _, name in _meta_columns(dt, options) if name is not None]
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
    }
    relational = plan is not None and not dialect.document_store
    return decoder, output_type(
        outputs,
        columns=plan.spark if relational else None,
        before=plan.spark if relational and options.include_before else None,
    )


def _decode_data_topic(recs: DataFrame, dt: _DataTopic, options: DecodeOptions, sampled: bool) -> StagedTopic:
    """The topic's decoding projection (tombstones included, see :class:`StagedTopic`).

    One call of the envelope decoder per record (:mod:`cdclake.decode.jvm`) gives the data columns and the
    envelope's metadata; the Kafka coordinates, key and headers come from the record.

    ``sampled``: the schema versions come from a sample alone (:func:`_discover_sample`); with schemas on, a
    usable envelope that does not start with a sampled schema text fails the pass (:data:`UNSAMPLED_MARKER`).
    """
    dialect, plan = dt.dialect, dt.plan
    frame = recs.where(F.col("topic") == F.lit(dt.topic))
    if dt.keep_hashes is not None:  # a later schema version changed a column's type: see DecodedBatch.schema_cuts
        frame = frame.where(F.col("value").isNull() | F.xxhash64(_schema_text(F.col("value"))).isin(*dt.keep_hashes))
    decoder, return_type = _data_plan(dt, options, sampled)
    # The decoding is a projection of its own. The optimizer does not inline it into the projection above (an
    # expensive expression referenced many times is never collapsed), but it would push a filter on its fields
    # below it, calling the decoder again for every field the filter reads: every caller therefore filters above
    # a projection holding a nondeterministic barrier (:func:`_barrier`). Pinned by the plan test in
    # tests/unit/decode/test_plan.py (one decoder call per topic).
    parsed = frame.select("*", decode_call(recs.sparkSession, decoder, return_type).alias("_d"))
    d = F.col("_d")

    def out(name: str) -> Column:
        return d.getField(name)

    reason = out("reason")
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
        (out(name) if name is not None else _record_column(column)).alias(column)
        for column, name in _meta_columns(dt, options)
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
        _barrier(),
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


def _decode_signal_topic(recs: DataFrame, dt: _DataTopic, options: DecodeOptions) -> DataFrame:
    """What :meth:`DecodedBatch.counts` counts the records of a signal table's topic as (they are skipped)."""
    path = "$." + (f.PAYLOAD + "." if options.value_schemas_enabled else "") + "after.type"
    kind = F.get_json_object(F.col("value"), path)
    watermark = F.coalesce(kind.isin(f.SIGNAL_WINDOW_OPEN, f.SIGNAL_WINDOW_CLOSE), F.lit(False))
    category = (
        F.when(F.col("value").isNull(), F.lit("tombstones"))
        .when(watermark, F.lit("watermarks_skipped"))
        .otherwise(F.lit("signals_skipped"))
    )
    return recs.where(F.col("topic") == F.lit(dt.topic)).select(category.alias("c"))


# -- transactions and schema changes --------------------------------------------------------------------------------


def _decode_transactions(
    recs: DataFrame, topics: list[str], options: DecodeOptions
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The transaction events, their dead letters and their categories (:func:`_categorised`)."""
    frame = recs.where(F.col("topic").isin(*topics)) if topics else recs.where(F.lit(False))
    parsed, env = _parse(frame, TX_EVENT_WIRE, options.value_schemas_enabled)
    status = F.upper(env[f.TX_STATUS])
    reason = (
        F.when(F.col("value").isNull(), F.lit(TOMBSTONE))
        .when(F.col("_j." + _CORRUPT).isNotNull(), _corrupt_reason(F.col("_j")))
        .when(env.isNull(), F.lit("missing_payload"))
        .when(~F.coalesce(status.isin(f.TX_STATUS_BEGIN, f.TX_STATUS_END), F.lit(False)), F.lit("unknown_tx_status"))
        .when(env[f.TX_ID].isNull(), F.lit("missing_tx_id"))
    )
    staged, usable, dead = _split(parsed, reason)
    collections = F.transform(
        env[f.TX_DATA_COLLECTIONS],
        lambda c: F.struct(
            c[f.TX_DATA_COLLECTION].alias("data_collection"), _long(c[f.TX_EVENT_COUNT]).alias("event_count")
        ),
    )
    good = staged.where(usable).select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
        F.regexp_replace(F.col("topic"), r"\.transaction$", "").alias("server"),
        status.alias("status"),
        env[f.TX_ID].alias("id"),
        _long(env[f.TX_EVENT_COUNT]).alias("event_count"),
        collections.alias("data_collections"),
        F.timestamp_millis(_long(env[f.TS_MS])).alias("ts"),
    )
    return good, _dead(staged.where(dead), F.col("_reason")), _categorised(staged, "transactions")


_SCHEMA_CHANGE_OUTPUTS = (
    "server", "connector", "database_name", "schema_name", "ddl", "table_changes", "source_ts", "ts", "position",
    "reason",
)  # fmt: skip


def _decode_schema_changes(
    recs: DataFrame, topics: dict[str, Dialect | None], options: DecodeOptions
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The schema change events, their dead letters and their categories (:func:`_categorised`).

    One envelope decoder per topic (its dialect gives the position rule; a topic of an unknown connector has
    no position).
    """
    return_type = output_type(_SCHEMA_CHANGE_OUTPUTS)
    decoded = []
    for topic, dialect in sorted(topics.items()) or [(None, None)]:
        decoder = {
            "kind": "schema_change",
            "position": dialect.position_rule if dialect is not None else None,
            "default_connector": dialect.name if dialect is not None else None,
            "schemas": options.value_schemas_enabled,
            "prefixes": [],
            "outputs": list(_SCHEMA_CHANGE_OUTPUTS),
        }
        frame = recs.where(F.col("topic") == F.lit(topic)) if topic is not None else recs.where(F.lit(False))
        decoded.append(frame.select("*", decode_call(recs.sparkSession, decoder, return_type).alias("_d")))
    parsed = reduce(lambda a, b: a.union(b), decoded)
    d = F.col("_d")
    staged, usable, dead = _split(parsed, d.getField("reason"))
    good = staged.where(usable).select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_ts"),
        F.coalesce(d.getField("server"), F.col("topic")).alias("server"),
        *[d.getField(n).alias(n) for n in _SCHEMA_CHANGE_OUTPUTS if n not in ("server", "reason")],
    )
    return good, _dead(staged.where(dead), F.col("_reason")), _categorised(staged, "schema_changes")


# -- entry point ----------------------------------------------------------------------------------------------------


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
    if RecordFormat.AVRO in (options.key_format, options.value_format):
        raise ConfigError("value_format/key_format 'avro' is not implemented; use the JsonConverter")
    zone = records.sparkSession.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "Z", "+00:00"):
        raise ConfigError(
            f"spark.sql.session.timeZone is {zone!r}; decoding needs UTC (build the session with build_spark_session)"
        )
    recs = normalise_records(records)
    topics = _discover_sample(sampler, options) if sample_only and sampler is not None else None
    sampled = topics is not None
    if topics is None:
        topics = _discover(recs, options, sampler)
    schemas = options.value_schemas_enabled

    tx_topics: list[str] = []
    sc_topics: dict[str, Dialect | None] = {}
    data_topics: list[_DataTopic] = []
    dead_frames: list[DataFrame] = []
    #: what every record of a topic without a decoding of its own counts as (tombstones aside)
    other: dict[str, str] = {}
    prefixes: set[str] = {options.topic_prefix} if options.topic_prefix else set()

    for topic in topics.values():
        if topic.name.startswith(f.HEARTBEAT_TOPIC_PREFIX):
            other[topic.name] = "heartbeats"
            prefixes.add(topic.name[len(f.HEARTBEAT_TOPIC_PREFIX) :])
            continue
        unwrapped = [_unwrap(s, schemas) for g in reversed(topic.groups) for s in g.samples]
        kinds = [_classify(topic.name, p) for p, _ in unwrapped if p is not None]
        kind = next((k for k in kinds if k), None)
        if topic.records == topic.tombstones:
            other[topic.name] = "tombstones"
            continue
        if kind in ("notification", "schema_history"):
            other[topic.name] = "notifications_skipped" if kind == "notification" else "schema_history_skipped"
            continue
        if kind == "transaction":
            tx_topics.append(topic.name)
            prefixes.add(topic.name.removesuffix(f.TRANSACTION_TOPIC_SUFFIX))
            continue
        if kind == "schema_change":
            source = next((p.get(f.SOURCE) for p, _ in unwrapped if p and isinstance(p.get(f.SOURCE), dict)), {})
            try:
                sc_topics[topic.name] = get_dialect(_infer_connector(source or {}))
            except UnsupportedDialectError:
                sc_topics[topic.name] = None
            continue
        if kind != "data":
            other[topic.name] = "dead_letters"
            dead_frames.append(
                _dead(
                    recs.where((F.col("topic") == topic.name) & F.col("value").isNotNull()),
                    _corrupt_or("unrecognised_record"),
                )
            )
            continue
        try:
            data_topics.append(_plan_data_topic(topic, unwrapped, options))
        except (UnsupportedDialectError, ConnectSchemaError, _NoSchema) as exc:
            reason = {
                UnsupportedDialectError: "unsupported_connector",
                ConnectSchemaError: "schema_error",
                _NoSchema: "no_schema",
            }[type(exc)]
            logger.warning("topic %s: all records dead-lettered (%s): %s", topic.name, reason, exc)
            other[topic.name] = "dead_letters"
            dead_frames.append(
                _dead(recs.where((F.col("topic") == topic.name) & F.col("value").isNotNull()), _corrupt_or(reason))
            )

    info: dict[TableId, TableInfo] = {}
    categories: list[DataFrame] = []
    schema_cuts: dict[tuple[str, int], int] = {}
    cut_reasons: dict[str, str] = {}
    staged: list[StagedTopic] = []
    for dt in data_topics:
        if dt.signal:
            categories.append(_decode_signal_topic(recs, dt, options))
            continue
        if dt.cuts:
            schema_cuts.update(dt.cuts)
            cut_reasons[dt.table_id.name] = f"{dt.topic}: {dt.cut_reason}"
        staged_topic = _decode_data_topic(recs, dt, options, sampled)
        staged.append(staged_topic)
        if dt.table_id in info:
            old = info[dt.table_id]
            info[dt.table_id] = TableInfo(
                dt.table_id, old.connector, (*old.topics, dt.topic), old.key_columns, old.schema, old.schema_versions
            )
            continue
        if dt.dialect.document_store:
            spark_schema = T.StructType(
                [
                    T.StructField(f.MONGO_KEY_ID, _S, True, {"cdc.connect.type": "string"}),
                    T.StructField("document", _S, True, {"cdc.connect.type": "string", "cdc.logical.type": f.DBZ_JSON}),
                ]
            )
        else:
            spark_schema = dt.plan.spark if dt.plan else T.StructType([])
        info[dt.table_id] = TableInfo(
            dt.table_id, dt.dialect.name, (dt.topic,), dt.key_columns, spark_schema, dt.versions
        )

    transactions, tx_dead, tx_categories = _decode_transactions(recs, tx_topics, options)
    schema_changes, sc_dead, sc_categories = _decode_schema_changes(recs, sc_topics, options)
    categories += [
        tx_categories,
        sc_categories,
        _other_categories(recs, other, [*tx_topics, *sc_topics, *(dt.topic for dt in data_topics)]),
    ]
    other_dead = _dead(recs.where(F.lit(False)), F.lit(None).cast("string"))
    for frame in [*dead_frames, tx_dead, sc_dead]:
        other_dead = other_dead.unionByName(frame)
    tables, dead_letters = assemble(staged, other_dead)
    logger.info(
        "decoded batch: %s tables, %s transaction topics, %s schema change topics, prefixes %s, discovery %s",
        len(tables),
        len(tx_topics),
        len(sc_topics),
        sorted(prefixes),
        "by sample" if sampled else "by pass",
    )
    return DecodedBatch(
        tables,
        info,
        transactions,
        schema_changes,
        dead_letters,
        categories,
        schema_cuts,
        cut_reasons,
        staged,
        other_dead,
        discovery="sample" if sampled else "pass",
    )


def _other_categories(recs: DataFrame, other: dict[str, str], decoded: list[str]) -> DataFrame:
    """What the records of every topic not decoded on its own count as (``other``: topic -> category).

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
    return frame.select(category.otherwise(unseen).alias("c"))


def decode_counted(
    records: DataFrame,
    *,
    options: DecodeOptions,
    sampler: RecordSampler | None = None,
    level: StorageLevel | None = None,
) -> tuple[DecodedBatch, dict[str, int]]:
    """Decode, :meth:`~DecodedBatch.materialise` and :meth:`~DecodedBatch.counts` a batch, trusting the sample.

    With a ``sampler`` whose sample is conclusive (``decode_records(..., sample_only=True)``), there is no
    pass over the records before decoding: the counting pass, which fills the cache, also checks that every
    record was foreseen. If one was not (a schema version or a topic outside the sample), the batch is decoded
    again, with discovery by a pass: slower, never wrong.

    Returns:
        The materialised batch (call :meth:`~DecodedBatch.release` when done) and its counts.
    """
    if sampler is not None:
        batch = decode_records(records, options=options, sampler=sampler, sample_only=True).materialise(level)
        try:
            return batch, batch.counts()
        except UnsampledRecordsError as exc:
            batch.release()
            logger.warning("discovery by sample missed records (%s); discovering by a pass over the batch", exc)
    batch = decode_records(records, options=options, sampler=sampler).materialise(level)
    return batch, batch.counts()


class _NoSchema(Exception):
    pass


def _corrupt_or(reason: str) -> Column:
    return F.when(F.try_parse_json(F.col("value")).isNull(), F.lit("invalid_json")).otherwise(F.lit(reason))


def _plan_data_topic(
    topic: _Topic, unwrapped: list[tuple[dict[str, Any] | None, dict[str, Any] | None]], options: DecodeOptions
) -> _DataTopic:
    payloads = [p for p, _ in unwrapped if p is not None and _classify(topic.name, p) == "data"]
    source = next((p[f.SOURCE] for p in payloads if isinstance(p.get(f.SOURCE), dict)), {})
    dialect = get_dialect(_infer_connector(source))
    server = source.get(f.SRC_NAME) or options.topic_prefix
    namespace = dialect.namespace(source.get(f.SRC_DB), source.get(f.SRC_SCHEMA))
    table = source.get(f.SRC_TABLE) or source.get(f.SRC_COLLECTION) or topic.name.rsplit(".", 1)[-1]
    table_id = TableId(server=server, namespace=namespace, table=table)
    qualified = f"{namespace}.{table}" if namespace else table
    signal = qualified in options.signal_tables or table in options.signal_tables
    key_sample = next((g.key_sample for g in reversed(topic.groups) if g.key_sample is not None), None)
    if dialect.document_store:
        return _DataTopic(topic.name, table_id, dialect, None, (f.MONGO_KEY_ID,), len(topic.groups), signal)
    versions: list[list[dict[str, Any]]] = []
    version_hashes: list[int | None] = []
    if options.value_schemas_enabled:
        for group in topic.groups:  # oldest first
            if group.schema_hash in version_hashes:
                continue
            for sample in group.samples:
                fields_ = _row_fields_from_schema(_unwrap(sample, True)[1])
                if fields_ is not None:
                    versions.append(fields_)
                    version_hashes.append(group.schema_hash)
                    break
    keep_hashes: tuple[int | None, ...] | None = None
    cuts: dict[tuple[str, int], int] = {}
    cut_reason = None
    if len(versions) > 1:
        split, cut_reason = _first_incompatible_version(versions, dialect.bits_byte_order)
        if split is not None:
            keep_hashes = tuple(version_hashes[:split])
            for group in topic.groups:
                if group.schema_hash in version_hashes[split:]:
                    tp = (topic.name, group.partition)
                    cuts[tp] = min(cuts.get(tp, group.first_offset), group.first_offset)
            versions = versions[:split]
            cut_reason = f"{cut_reason}; cut at {', '.join(f'{t}/{p}@{o}' for (t, p), o in sorted(cuts.items()))}"
            logger.warning("topic %s: incompatible schema change inside the batch: %s", topic.name, cut_reason)
    if not versions:
        fields_ = options.schema_source.row_fields(topic.name, qualified)
        if fields_ is None:
            if signal:
                return _DataTopic(topic.name, table_id, dialect, None, (), 0, signal)
            raise _NoSchema(f"no Connect schema in the records and none in the schema source for {qualified}")
        versions.append(fields_)
    plan = plan_row(merge_fields(versions), bits_byte_order=dialect.bits_byte_order)
    key_columns = options.schema_source.key_columns(topic.name, qualified) or _key_columns(
        key_sample, options.key_schemas_enabled
    )
    return _DataTopic(
        topic.name,
        table_id,
        dialect,
        plan,
        key_columns,
        len(versions),
        signal,
        keep_hashes,
        cuts,
        cut_reason,
        tuple(topic.prefixes),
    )


def _first_incompatible_version(
    versions: list[list[dict[str, Any]]], bits_byte_order: str
) -> tuple[int | None, str | None]:
    """Index of the first schema version that changes an earlier column's type in a way one parse cannot hold.

    Widening is compatible (int -> long, float -> double, decimal precision up at the same scale); any other
    type change (string -> int, ...) starts a new run of versions that must be decoded in a later batch.
    """
    merged: dict[str, T.DataType] = {}
    for index, fields_ in enumerate(versions):
        for fld in fields_:
            name = fld[f.SCHEMA_FIELD]
            try:
                new = plan_type(fld, bits_byte_order=bits_byte_order).spark
            except ConnectSchemaError:
                continue
            old = merged.get(name)
            if old is not None and not _widens(old, new):
                return index, f"column {name}: {old.simpleString()} -> {new.simpleString()}"
            merged[name] = new
    return None, None


def _widens(old: T.DataType, new: T.DataType) -> bool:
    if old == new:
        return True
    if isinstance(old, T.IntegerType) and isinstance(new, T.LongType):
        return True
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale == old.scale and new.precision >= old.precision
    return False
