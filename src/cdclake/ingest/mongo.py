"""MongoDB change events into current documents: partial updates merged into the stored document.

A MongoDB update without a full document (change streams without ``fullDocument``, or the legacy
oplog connector) carries only ``updateDescription``: ``updatedFields`` (a JSON object whose keys are
dotted paths, e.g. ``"address.city"`` or ``"items.1"``), ``removedFields`` (dotted paths) and
``truncatedArrays`` (``{field, size}``). Such updates cannot be "latest event wins": every patch of a
key in the batch is folded, in ``_cdc_position`` order, onto the document stored in the lake (or the
batch's last full document of that key). This path runs as a Python UDF, which is acceptable because
only MongoDB tables use it and it sees one row per key.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

FOLD_TYPE = T.StructType([T.StructField("op", T.StringType()), T.StructField("document", T.StringType())])


def _walk(doc: Any, parts: list[str], create: bool) -> tuple[Any, str] | None:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, list):
            index = int(part)
            if index >= len(node):
                return None
            node = node[index]
        elif isinstance(node, dict):
            if part not in node:
                if not create:
                    return None
                node[part] = {}
            node = node[part]
        else:
            return None
    return node, parts[-1]


def apply_patch(
    document: str | None, updated: str | None, removed: list[str] | None, truncated: list[Any] | None
) -> str | None:
    """Apply one ``updateDescription`` to a document (JSON strings in, JSON string out; pure)."""
    doc: Any = json.loads(document) if document else {}
    for path, value in (json.loads(updated) if updated else {}).items():
        found = _walk(doc, path.split("."), create=True)
        if found is None:
            continue
        parent, last = found
        if isinstance(parent, list):
            index = int(last)
            parent.extend([None] * (index + 1 - len(parent)))
            parent[index] = value
        else:
            parent[last] = value
    for path in removed or []:
        found = _walk(doc, path.split("."), create=False)
        if found is not None:
            parent, last = found
            if isinstance(parent, dict):
                parent.pop(last, None)
            elif isinstance(parent, list) and int(last) < len(parent):
                parent[int(last)] = None
    for item in truncated or []:
        field, size = (item["field"], item["size"]) if isinstance(item, dict) else (item[0], item[1])
        found = _walk(doc, field.split("."), create=False)
        if found is not None:
            parent, last = found
            target = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if isinstance(target, list):
                del target[int(size) :]
    return json.dumps(doc, separators=(",", ":"), sort_keys=False)


def fold_events(stored: str | None, events: list[Any]) -> tuple[str, str | None]:
    """Fold a key's events (sorted by position) onto the stored document; returns (op, document)."""
    document, op = stored, None
    for event in events:
        op = event["op"]
        if op == "d":
            document = None
        elif event["document"] is not None:
            document = event["document"]
        elif op == "u":
            document = apply_patch(document, event["updated"], event["removed"], event["truncated"])
    return op or "u", document


@F.udf(returnType=FOLD_TYPE)
def _fold_udf(stored, events):  # type: ignore[no-untyped-def]  # no hints: PySpark would read them as pandas-UDF hints
    ordered = sorted(events, key=lambda e: [int(x) for x in e["position"]])
    return fold_events(stored, ordered)


def fold_documents(events: DataFrame, stored: DataFrame) -> DataFrame:
    """One row per key (``id``): the latest event's metadata with ``document`` folded from all its events.

    Args:
        events: MongoDB row events (``id``, ``document``, ``_cdc_*`` incl. update description columns).
        stored: the lake table's ``id, document``.
    """
    newest = Window.partitionBy("id").orderBy(F.col("_cdc_position").desc())
    patches = events.groupBy("id").agg(
        F.collect_list(
            F.struct(
                F.col("_cdc_op").alias("op"),
                F.col("document").alias("document"),
                F.col("_cdc_updated_fields").alias("updated"),
                F.col("_cdc_removed_fields").alias("removed"),
                F.col("_cdc_truncated_arrays").alias("truncated"),
                F.col("_cdc_position").alias("position"),
            )
        ).alias("__events")
    )
    latest = events.withColumn("__rn", F.row_number().over(newest)).where("__rn = 1").drop("__rn", "document")
    base = stored.select(F.col("id"), F.col("document").alias("__stored"))
    folded: Column = _fold_udf(F.col("__stored"), F.col("__events"))
    return (
        latest.join(patches, "id")
        .join(base, "id", "left")
        .withColumn("__fold", folded)
        .withColumn("_cdc_op", F.col("__fold.op"))
        .withColumn("document", F.col("__fold.document"))
        .drop("__fold", "__events", "__stored")
    )
