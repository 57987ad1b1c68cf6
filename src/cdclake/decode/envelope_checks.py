"""Checks of a topic's schema versions and of the identity its records must carry, done on discovery's samples.

A schema version that is not a well-formed Connect schema, or whose sample contradicts it, never reaches a
plan: its records are dead letters (:func:`schema_problem`, :func:`sample_contradicts`). A topic's records must
all come from one connector and one table, the one most of the topic's records name (:func:`topic_identity`);
the envelope decoder dead-letters the others as ``foreign_envelope``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from cdclake.debezium import fields as f
from cdclake.decode.topics import SchemaGroup

#: source block fields that name a record's table (see the decoder's ``identity`` plan)
IDENTITY_FIELDS = (f.SRC_DB, f.SRC_SCHEMA, f.SRC_TABLE, f.SRC_COLLECTION)

_STRUCTURED = {"struct", "array", "map"}
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int8": (int,),
    "int16": (int,),
    "int32": (int,),
    "int64": (int,),
    "float32": (int, float, str),
    "float64": (int, float, str),
    # JsonConverter's spelling of FLOAT32/FLOAT64
    "float": (int, float, str),
    "double": (int, float, str),
    "boolean": (bool,),
    "string": (str,),
    "bytes": (str,),
    "struct": (dict,),
    "array": (list,),
    "map": (dict, list),
}


def schema_problem(schema: Any) -> str | None:
    """What makes an envelope's Connect schema unusable, or None.

    The envelope is a struct whose ``before``/``after`` fields (when present) are structs; every struct field,
    at any depth, has a non-empty name unique within its struct and a known type.
    """
    if not isinstance(schema, Mapping):
        return None  # no embedded schema: nothing to check here
    return _struct_problem(schema, "schema")


def _struct_problem(schema: Mapping[str, Any], where: str) -> str | None:
    fields_ = schema.get(f.SCHEMA_FIELDS)
    if not isinstance(fields_, list):
        return f"{where}: a struct without a list of fields"
    seen: set[str] = set()
    for index, fld in enumerate(fields_):
        if not isinstance(fld, Mapping):
            return f"{where}: field {index} is not an object"
        name = fld.get(f.SCHEMA_FIELD)
        if not isinstance(name, str) or not name:
            return f"{where}: field {index} has no name"
        if name in seen:
            return f"{where}: field {name!r} appears twice"
        seen.add(name)
        problem = _type_problem(fld, f"{where}.{name}")
        if problem:
            return problem
    return None


def _type_problem(schema: Mapping[str, Any], where: str) -> str | None:
    kind = schema.get(f.SCHEMA_TYPE)
    if kind not in _JSON_TYPES:
        return f"{where}: unknown type {kind!r}"
    if kind == "struct":
        return _struct_problem(schema, where)
    if kind == "array" and isinstance(schema.get(f.SCHEMA_ITEMS), Mapping):
        return _type_problem(schema[f.SCHEMA_ITEMS], f"{where}[]")
    return None


def sample_contradicts(sample: Any, schemas: bool) -> str | None:
    """How a sampled record's payload contradicts its own schema, or None.

    A row image (``before``/``after``) has only fields of its schema, each null or of the JSON type its Connect
    type is written as.
    """
    if not schemas or not isinstance(sample, Mapping):
        return None
    schema, payload = sample.get(f.SCHEMA), sample.get(f.PAYLOAD)
    if not isinstance(schema, Mapping) or not isinstance(payload, Mapping):
        return None
    for fld in schema.get(f.SCHEMA_FIELDS) or []:
        name = fld.get(f.SCHEMA_FIELD)
        if name in (f.BEFORE, f.AFTER) and fld.get(f.SCHEMA_TYPE) == "struct":
            problem = _value_problem(payload.get(name), fld, name)
            if problem:
                return problem
    return None


def _value_problem(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if value is None:
        # a required field may be null in a real image: PostgreSQL's delete before-image under REPLICA IDENTITY
        # DEFAULT, MySQL's minimal row image (the decoder checks the key columns)
        return None
    kind = schema.get(f.SCHEMA_TYPE)
    allowed = _JSON_TYPES.get(str(kind))
    if allowed is None:
        return None
    if not isinstance(value, allowed) or (bool not in allowed and isinstance(value, bool)):
        return f"{where}: {type(value).__name__} where the schema says {kind}"
    if kind == "struct":
        names = {fld.get(f.SCHEMA_FIELD) for fld in schema.get(f.SCHEMA_FIELDS) or []}
        extra = sorted(set(value) - names)
        if extra:
            return f"{where}: fields {extra} are not in its schema"
        for fld in schema.get(f.SCHEMA_FIELDS) or []:
            name = fld.get(f.SCHEMA_FIELD)
            if name in value:
                problem = _value_problem(value[name], fld, f"{where}.{name}")
                if problem:
                    return problem
    return None


def source_identity(payload: Any) -> tuple[str | None, tuple[tuple[str, str], ...]] | None:
    """A payload's connector and the source fields naming its table, or None without a source block."""
    source = payload.get(f.SOURCE) if isinstance(payload, Mapping) else None
    if not isinstance(source, Mapping):
        return None
    named = tuple((k, str(source[k])) for k in IDENTITY_FIELDS if source.get(k) is not None)
    connector = source.get(f.SRC_CONNECTOR)
    return (str(connector).lower() if connector is not None else None), named


def topic_identity(
    groups: Sequence[SchemaGroup], payloads: Mapping[int, Sequence[Any]]
) -> tuple[str | None, tuple[tuple[str, str], ...]] | None:
    """The connector and table most of a topic's records name: each group's first sampled identity, weighted by
    the group's records (``payloads``: the unwrapped sample payloads per group index)."""
    votes: Counter[tuple[str | None, tuple[tuple[str, str], ...]]] = Counter()
    for index, group in enumerate(groups):
        ident = next((i for i in map(source_identity, payloads.get(index, ())) if i is not None), None)
        if ident is not None:
            votes[ident] += max(1, group.records - group.tombstones)
    if not votes:
        return None
    return max(votes.items(), key=lambda kv: kv[1])[0]
