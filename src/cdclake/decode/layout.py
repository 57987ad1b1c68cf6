"""Where a record's embedded Connect schema ends: the JsonConverter writes ``{"schema":{...},"payload":...}``."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdclake.debezium import fields as f

#: (start, delimiter) of the layouts whose schema text is a byte slice: the JsonConverter's compact JSON, and
#: Python's ``json.dumps`` default separators (hand-made or re-serialised dumps).
SCHEMA_LAYOUTS = (
    ('{"' + f.SCHEMA + '":{', ',"' + f.PAYLOAD + '":'),
    ('{"' + f.SCHEMA + '": {', ', "' + f.PAYLOAD + '": '),
)


def schema_text(value: Column) -> Column:
    """The text of the embedded Connect schema.

    The fast path is everything before the first ``,"payload":`` (``substring_index`` slices bytes; ``locate`` +
    ``substring`` would count characters through kilobytes of schema per record). The first occurrence is
    structural: inside JSON strings the quotes are escaped, and the schema's own keys are fixed names. Records
    in another layout (see :data:`SCHEMA_LAYOUTS`) fall back to ``get_json_object``, several times slower.
    """
    text = F.when(F.lit(False), F.lit(None).cast("string"))
    for matches, schema, _ in _layout_slices(value):
        text = text.when(matches, schema)
    return text.otherwise(F.get_json_object(value, "$." + f.SCHEMA))


def _layout_slices(value: Column) -> list[tuple[Column, Column, str]]:
    """Per layout of :data:`SCHEMA_LAYOUTS`: (the record is in it, its schema text, the delimiter after it)."""
    out = []
    for start, delimiter in SCHEMA_LAYOUTS:
        fast = F.substring_index(value, delimiter, 1)
        out.append((value.startswith(F.lit(start)) & (F.octet_length(fast) < F.octet_length(value)), fast, delimiter))
    return out


def schema_prefix_text(value: str) -> str | None:
    """:func:`schema_prefix` of one record's text, in the driver."""
    for start, delimiter in SCHEMA_LAYOUTS:
        if value.startswith(start):
            end = value.find(delimiter)
            if end >= 0:
                return value[: end + len(delimiter)]
    return None


def schema_prefix(value: Column) -> Column:
    """The record's schema text and the delimiter after it (what the envelope decoder skips), or null
    for a record in no layout of :data:`SCHEMA_LAYOUTS`."""
    prefix = F.when(F.lit(False), F.lit(None).cast("string"))
    for matches, schema, delimiter in _layout_slices(value):
        prefix = prefix.when(matches, F.concat(schema, F.lit(delimiter)))
    return prefix
