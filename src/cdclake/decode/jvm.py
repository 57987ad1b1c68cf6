"""The envelope decoder's JVM side (``jvm/decoder``): a Spark SQL function per topic plan.

Parsing and converting a record is the per-record work of decoding, and it runs in the JVM: one Java function
(``dev.cdclake.decode.spark.DecodeFunction``) reads a record's value with a streaming JSON parser, checks every
value against its column's wire type and converts it to the planned Spark type, and returns one struct of the
outputs the plan names. Everything else (discovery, planning, the output frames, dead letters) is done in
Python by the other modules of :mod:`cdclake.decode`. The jar is built from source by ``make jars`` into
``.cache/jvm/spark`` with the other jars every cdclake Spark session loads.

A plan is JSON: ``kind`` (``data``, ``schema_change`` or ``transaction``), the dialect's ``position`` rule,
converter settings and, for data topics, the columns' codecs (:meth:`cdclake.decode.connect.RowPlan.codecs`);
``outputs`` lists the struct's fields in order, and :func:`output_type` gives their Spark types. The function is
registered in the session under a name derived from the plan, so one plan is one function however often it is
used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdclake.decode.columns import META_COLUMNS, Origin
from cdclake.exceptions import NotInstalledError
from cdclake.gateway import jvm_class

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DECODE_FUNCTION_CLASS = "dev.cdclake.decode.spark.DecodeFunction"

_S = T.StringType()

#: Spark type of each non-column output of a decoder (``data`` stands for the columns, ``before`` is typed by
#: the caller: the row type of a relational table, text for a document store). The outputs that are metadata
#: columns of the change rows have those columns' types (:mod:`cdclake.decode.columns`).
OUTPUT_TYPES: dict[str, T.DataType] = {
    "document": _S,
    **{c.source: c.type for c in META_COLUMNS if c.origin is Origin.DECODER and c.source and c.type is not None},
    "reason": _S,
    "invalid": T.BooleanType(),
    "unsampled": T.BooleanType(),
    # schema change topics
    "server": _S,
    "database_name": _S,
    "schema_name": _S,
    "ddl": _S,
    "table_changes": _S,
    "ts": T.TimestampType(),
    # transaction topics (``tx_id`` and ``ts`` above)
    "status": _S,
    "event_count": T.LongType(),
    "data_collections": T.ArrayType(
        T.StructType([T.StructField("data_collection", _S), T.StructField("event_count", T.LongType())])
    ),
}


def output_type(
    outputs: Sequence[str], *, columns: T.StructType | None = None, before: T.DataType | None = None
) -> T.StructType:
    """The struct a decoder with these ``outputs`` returns (``data`` expands to ``columns``)."""
    out: list[T.StructField] = []
    for name in outputs:
        if name == "data":
            out += [T.StructField(c.name, c.dataType, True, c.metadata) for c in (columns or T.StructType([]))]
        elif name == "before":
            out.append(T.StructField("before", before or _S))
        else:
            out.append(T.StructField(name, OUTPUT_TYPES[name]))
    return T.StructType(out)


def decode_call(spark: SparkSession, plan: Mapping[str, Any], return_type: T.StructType) -> Column:
    """The decoder of ``plan`` applied to the record columns ``value``, ``key``, ``partition`` and ``offset``.

    Raises:
        NotInstalledError: the decoder's jar is not on the session's classpath (``make jars``).
        ValueError: the decoder refused the plan (the message says why).
    """
    return F.call_function(
        register_decoder(spark, plan, return_type),
        F.col("value").cast("binary"),
        F.col("key").cast("binary"),
        F.col("partition").cast("int"),
        F.col("offset").cast("long"),
    )


def decode_topics(
    recs: DataFrame, plans: Mapping[str | None, Mapping[str, Any]], return_type: T.StructType
) -> DataFrame:
    """``recs`` of the topics of ``plans``, each with its decoder's struct in ``_d`` (one decoder per topic; the
    plans' ``outputs`` give ``return_type``). A ``None`` topic stands for none: no records."""
    spark = recs.sparkSession
    frames = [
        (recs.where(F.col("topic") == F.lit(topic)) if topic is not None else recs.where(F.lit(False))).select(
            "*", decode_call(spark, plan, return_type).alias("_d")
        )
        for topic, plan in plans.items()
    ]
    return reduce(lambda a, b: a.union(b), frames)


def register_decoder(spark: SparkSession, plan: Mapping[str, Any], return_type: T.StructType) -> str:
    """Register the decoder of ``plan`` in ``spark`` (idempotent) and return its function name."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{text}\n{return_type.json()}".encode()).hexdigest()[:24]
    name = f"cdclake_decode_{digest}"
    try:
        function = jvm_class(spark, DECODE_FUNCTION_CLASS)(text)
    except TypeError as exc:  # py4j: the class is not on the classpath ("'JavaPackage' object is not callable")
        raise NotInstalledError(
            f"the envelope decoder ({DECODE_FUNCTION_CLASS}) is not on the Spark classpath; run `make jars`"
            " (it builds .cache/jvm/spark/cdclake-decoder-*.jar) and start a new Spark session"
        ) from exc
    except Exception as exc:  # Py4JJavaError: the decoder refused the plan
        raise ValueError(f"the envelope decoder refused its plan: {_java_message(exc)}") from exc
    session = spark._jsparkSession  # type: ignore[attr-defined]
    session.udf().register(name, function, session.parseDataType(return_type.json()))
    return name


def _java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    messages = []
    while java is not None:
        messages.append(str(java.toString()))
        java = java.getCause()
    return "; caused by ".join(messages) or str(exc)
