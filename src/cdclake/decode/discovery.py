"""Discovery: the schema versions of every topic of a batch, with counts and sample records.

By a pass (:func:`discover`): one hash aggregation per (topic, schema fingerprint, partition), then a lookup of
the few sample records. From a sample alone (:func:`discover_sample`): the sampler's records, when they are
conclusive; the decoding pass then checks what a sample cannot show (:data:`cdclake.decode.counts.UNSAMPLED_MARKER`).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdclake.debezium import fields as f
from cdclake.decode.classification import classify, unwrap
from cdclake.decode.envelope_checks import schema_problem
from cdclake.decode.layout import schema_prefix, schema_prefix_text, schema_text
from cdclake.decode.options import DecodeOptions
from cdclake.decode.records import RecordSampler, normalise_records
from cdclake.decode.topics import DiscoveredTopic, SchemaGroup, loads

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Discovery samples records whose offset is a multiple of this (see :func:`known_schemas`).
SAMPLE_EVERY = 512


def discover_topics(
    recs: DataFrame, options: DecodeOptions, sampler: RecordSampler | None, *, sample_only: bool
) -> tuple[dict[str, DiscoveredTopic], bool]:
    """The batch's topics, from the sampler's records alone when ``sample_only`` and they are conclusive,
    else by a pass; and whether they came from the sample."""
    topics = discover_sample(sampler, options) if sample_only and sampler is not None else None
    if topics is not None:
        return topics, True
    return discover(recs, options, sampler), False


def known_schemas(recs: DataFrame, sampler: RecordSampler | None = None) -> dict[str, list[tuple[str, int]]]:
    """Schema texts seen in a sample of the records, per topic: ``(text + delimiter, fingerprint)``.

    The sample is ``sampler.spread()``, or else the records whose offset is a multiple of
    :data:`SAMPLE_EVERY` (every partition's first record when its range starts at 0), so a large topic is
    almost surely sampled; a schema version outside the sample costs what it costs (its records are hashed).
    """
    value = F.col("value")
    sample = (
        normalise_records(sampler.spread())
        if sampler is not None
        else recs.where(F.col("offset") % F.lit(SAMPLE_EVERY) == F.lit(0))
    )
    rows = (
        sample.where(value.isNotNull())
        .select("topic", schema_prefix(value).alias("prefix"), F.xxhash64(schema_text(value)).alias("fingerprint"))
        .where(F.col("prefix").isNotNull())
        .distinct()
        .collect()
    )
    known: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in rows:
        known[row["topic"]].append((row["prefix"], int(row["fingerprint"])))
    return dict(known)


def fingerprint(value: Column, known: dict[str, list[tuple[str, int]]]) -> Column:
    """``xxhash64`` of the record's schema text (:func:`cdclake.decode.layout.schema_text`), fast for schemas
    in ``known``.

    A record that starts with a known schema text followed by its delimiter has exactly that schema
    text (the delimiter's first occurrence is where the text ends), so its fingerprint is the known one:
    a byte comparison instead of a search for the delimiter and a hash of kilobytes of schema.
    """
    expr = F.when(F.lit(False), F.lit(None).cast("long"))
    for topic, entries in sorted(known.items()):
        for prefix, hashed in entries:
            expr = expr.when(
                (F.col("topic") == F.lit(topic)) & value.startswith(F.lit(prefix)), F.lit(hashed).cast("long")
            )
    return expr.otherwise(F.xxhash64(schema_text(value)))


def discover(
    recs: DataFrame, options: DecodeOptions, sampler: RecordSampler | None = None
) -> dict[str, DiscoveredTopic]:
    """Per (topic, schema version): counts and the offsets of sample records, then the samples themselves.

    Two cheap jobs: a hash aggregation over fixed-width values only (no record text in the aggregation buffers,
    which would force a sort-based aggregation over every record), then a lookup of the few sample records
    (a small read with ``sampler``, else a filter over the records).
    """
    value = F.col("value")
    known: dict[str, list[tuple[str, int]]] = {}
    schema_hash = F.lit(None).cast("long")
    if options.value_schemas_enabled:
        known = known_schemas(recs, sampler)
        schema_hash = fingerprint(value, known)
    # samples are parsed in the driver: never an oversized record (the decoder dead-letters it)
    sampleable = value.startswith("{") & (F.octet_length(value) <= F.lit(options.max_record_bytes))
    json_offset = F.when(sampleable, F.col("offset"))
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

    topics: dict[str, DiscoveredTopic] = {}
    for row in rows:
        texts = []
        for part, off in ((row["last_partition"], row["last_json"]), (row["first_partition"], row["first_json"])):
            sample = samples.get((row["topic"], int(part), int(off))) if off is not None else None
            texts.append(loads(sample["value"]) if sample is not None else None)
        key_row = (
            samples.get((row["topic"], int(row["key_partition"]), int(row["key_offset"])))
            if row["key_offset"] is not None
            else None
        )
        topics.setdefault(row["topic"], DiscoveredTopic(row["topic"])).groups.append(
            SchemaGroup(
                row["topic"],
                row["schema_hash"],
                int(row["records"]),
                int(row["tombstones"] or 0),
                int(row["last_offset"] or 0),
                [t for t in texts if t is not None],
                loads(key_row["key"]) if key_row is not None else None,
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


def discover_sample(sampler: RecordSampler, options: DecodeOptions) -> dict[str, DiscoveredTopic] | None:
    """Discovery from the sampler's records alone (one small read, no pass over the batch), or None.

    The sample is conclusive, and the topics are returned, when every topic in it (heartbeat topics aside)
    shows a record that classifies it and, with schemas on, one schema version in the JsonConverter layout.
    Otherwise None: the caller discovers by a pass (:func:`discover`). What a sample cannot show, a topic
    or a schema version seen in no sampled record, is checked by the decoding itself
    (:data:`cdclake.decode.counts.UNSAMPLED_MARKER`). A sampled group's ``records`` and ``tombstones`` count
    the sample, not the batch. The sample is read in the driver (:meth:`RecordSampler.spread_rows`): no Spark
    job when the sampler reads its source itself.
    """
    schemas = options.value_schemas_enabled
    rows = []
    for record in sampler.spread_rows():
        prefix = schema_prefix_text(record.value) if record.value is not None else None
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
    topics: dict[str, DiscoveredTopic] = {}
    for name, topic_rows in sorted(by_topic.items()):
        values = [r for r in topic_rows if r["value"] is not None]
        parsed = {id(r): loads(r["value"]) if len(r["value"]) <= options.max_record_bytes else None for r in values}
        if schemas and any(
            schema_problem(schema)
            for payload, schema in (unwrap(v, True) for v in parsed.values())
            if payload is not None and classify(name, payload) == "data"
        ):
            return None  # a malformed schema version of a table: a pass tells its records apart (by fingerprint)
        if not name.startswith(f.HEARTBEAT_TOPIC_PREFIX):
            payloads = [unwrap(parsed[id(r)], schemas)[0] for r in values]
            if not any(p is not None and classify(name, p) for p in payloads):
                return None  # only tombstones or unclassifiable records in the sample
            if schemas and (any(r["prefix"] is None for r in values) or len({r["fingerprint"] for r in values}) != 1):
                return None  # several schema versions (or another layout): their order needs the pass
        topic = DiscoveredTopic(name, prefixes=sorted({r["prefix"] for r in values if r["prefix"] is not None}))
        version = values[0]["fingerprint"] if schemas and values else None
        for partition in sorted({r["partition"] for r in topic_rows}):
            part = sorted((r for r in topic_rows if r["partition"] == partition), key=lambda r: r["offset"])
            keyed = [r for r in part if r["key"] is not None and r["value"] is not None]
            topic.groups.append(
                SchemaGroup(
                    name,
                    version,
                    len(part),
                    sum(r["value"] is None for r in part),
                    part[-1]["offset"],
                    [parsed[id(r)] for r in reversed(part) if r["value"] is not None and parsed[id(r)] is not None],
                    loads(keyed[-1]["key"]) if keyed else None,
                    int(partition),
                    part[0]["offset"],
                    part[0]["timestamp"],
                )
            )
        topics[name] = topic
    return topics or None
