"""Planning a data topic from its samples: its table, dialect, row plan (the Connect schema versions merged by
column name), key columns, and where a schema change that one parse cannot hold cuts the topic."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import types as T

from cdclake.debezium import fields as f
from cdclake.decode.classification import Unwrapped, classify, infer_connector, unwrap
from cdclake.decode.connect import RowPlan, merge_fields, plan_row, plan_type
from cdclake.decode.envelope_checks import sample_contradicts, schema_problem, source_identity, topic_identity
from cdclake.decode.options import DecodeOptions, TableId
from cdclake.decode.topics import DiscoveredTopic, SchemaGroup
from cdclake.dialects import Dialect, get_dialect
from cdclake.exceptions import ConnectSchemaError, UnsupportedDialectError

logger = logging.getLogger(__name__)


@dataclass
class DataTopic:
    """The plan of one data topic."""

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
    identity: dict[str, str] = field(default_factory=dict)  # source fields naming the table: others are foreign
    dead_hashes: dict[int, str] = field(default_factory=dict)  # schema versions whose records are dead letters
    keyed: bool = False  # the topic's records have Kafka keys: a record without one is a dead letter


class _NoSchema(Exception):
    pass


_FAILURES: dict[type[Exception], str] = {
    UnsupportedDialectError: "unsupported_connector",
    ConnectSchemaError: "schema_error",
    _NoSchema: "no_schema",
}


@dataclass
class PlannedTopics:
    """The data topics' plans, and the dead-letter reason of every topic that cannot be planned."""

    topics: list[DataTopic] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def plan_data_topics(
    candidates: list[tuple[DiscoveredTopic, list[Unwrapped]]], options: DecodeOptions
) -> PlannedTopics:
    """Plan each data topic (with its unwrapped samples, latest schema version first)."""
    planned = PlannedTopics()
    for topic, unwrapped in candidates:
        try:
            planned.topics.append(plan_data_topic(topic, unwrapped, options))
        except (UnsupportedDialectError, ConnectSchemaError, _NoSchema) as exc:
            reason = _FAILURES[type(exc)]
            logger.warning("topic %s: all records dead-lettered (%s): %s", topic.name, reason, exc)
            planned.failed[topic.name] = reason
    return planned


def plan_data_topic(topic: DiscoveredTopic, unwrapped: list[Unwrapped], options: DecodeOptions) -> DataTopic:
    """The plan of one data topic.

    Raises:
        UnsupportedDialectError: the connector is not supported.
        ConnectSchemaError: a Connect schema cannot be planned.
        _NoSchema: the records carry no schema and the schema source has none.
    """
    group_payloads = {
        index: [unwrap(sample, options.value_schemas_enabled)[0] for sample in group.samples]
        for index, group in enumerate(topic.groups)
    }
    identity = topic_identity(topic.groups, group_payloads)
    payloads = [
        p
        for p, _ in unwrapped
        if p is not None and classify(topic.name, p) == "data" and source_identity(p) in (identity, None)
    ]
    source = next((p[f.SOURCE] for p in payloads if isinstance(p.get(f.SOURCE), dict)), {})
    dialect = get_dialect(infer_connector(source))
    server = source.get(f.SRC_NAME) or options.topic_prefix
    namespace = dialect.namespace(source.get(f.SRC_DB), source.get(f.SRC_SCHEMA))
    table = source.get(f.SRC_TABLE) or source.get(f.SRC_COLLECTION) or topic.name.rsplit(".", 1)[-1]
    table_id = TableId(server=server, namespace=namespace, table=table)
    qualified = f"{namespace}.{table}" if namespace else table
    signal = qualified in options.signal_tables or table in options.signal_tables
    key_sample = next((g.key_sample for g in reversed(topic.groups) if g.key_sample is not None), None)
    if dialect.document_store:
        return DataTopic(topic.name, table_id, dialect, None, (f.MONGO_KEY_ID,), len(topic.groups), signal)
    versions: list[list[dict[str, Any]]] = []
    version_hashes: list[int | None] = []
    dead_hashes: dict[int, str] = {}
    if options.value_schemas_enabled:
        for index, group in enumerate(topic.groups):  # oldest first
            if group.schema_hash in version_hashes or group.schema_hash in dead_hashes:
                continue
            reason = _version_problem(topic.name, group, group_payloads[index], identity)
            if reason is not None:
                if group.schema_hash is not None:
                    dead_hashes[group.schema_hash] = reason
                continue
            for sample in group.samples:
                fields_ = _row_fields_from_schema(unwrap(sample, True)[1])
                if fields_ is not None:
                    versions.append(fields_)
                    version_hashes.append(group.schema_hash)
                    break
    keep_hashes: tuple[int | None, ...] | None = None
    cuts: dict[tuple[str, int], int] = {}
    cut_reason = None
    if len(versions) > 1:
        split, cut_reason = first_incompatible_version(versions, dialect.bits_byte_order)
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
        seen = frozenset(
            name
            for p in payloads
            for image in (p.get(f.AFTER), p.get(f.BEFORE))
            if isinstance(image, dict)
            for name in image
        )
        fields_ = options.schema_source.row_fields(topic.name, qualified, seen_fields=seen)
        if fields_ is None:
            if signal:
                return DataTopic(topic.name, table_id, dialect, None, (), 0, signal)
            raise _NoSchema(
                f"no Connect schema in the records, and the schema source "
                f"({options.schema_source.describe()}) has none for {qualified}"
            )
        versions.append(fields_)
    plan = plan_row(merge_fields(versions), bits_byte_order=dialect.bits_byte_order)
    key_columns = options.schema_source.key_columns(topic.name, qualified) or _key_columns(
        key_sample, options.key_schemas_enabled
    )
    return DataTopic(
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
        dict(identity[1]) if identity is not None else {},
        dead_hashes,
        key_sample is not None,
    )


def _version_problem(
    topic: str, group: SchemaGroup, payloads: list[Any], identity: tuple[Any, ...] | None
) -> str | None:
    """Why a schema version's records are dead letters (its schema is malformed, no sample agrees with it, or
    they name another table than the topic's), or None. A foreign version is left to the decoder, which tells
    each record's source block (``foreign_envelope``); it only must not shape the plan.

    A sample that contradicts the schema while another agrees is one bad record, not a bad version: the decoder
    dead-letters that record alone (``type_mismatch``, ``unknown_field``), and the version's other records decode.
    """
    contradictions: list[str] = []
    agreed = False
    for sample, payload in zip(group.samples, payloads, strict=False):
        if isinstance(sample, dict) and (problem := schema_problem(sample.get(f.SCHEMA))):
            logger.warning("topic %s: a schema version's records are dead letters (invalid_schema): %s", topic, problem)
            return "invalid_schema"
        if (problem := sample_contradicts(sample, True)) is not None:
            contradictions.append(problem)
            continue
        agreed = True
        ident = source_identity(payload)
        if identity is not None and ident is not None and ident != identity:
            return _FOREIGN
    if contradictions and not agreed:
        logger.warning(
            "topic %s: a schema version's records are dead letters (schema_mismatch): %s", topic, contradictions[0]
        )
        return "schema_mismatch"
    if contradictions:
        logger.warning(
            "topic %s: a sampled record contradicts its schema (%s); it alone is a dead letter",
            topic,
            contradictions[0],
        )
    return None


_FOREIGN = "foreign_envelope"


def first_incompatible_version(
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
