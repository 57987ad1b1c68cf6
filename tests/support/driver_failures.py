"""A real failure of the Spark driver JVM for the tests of what a job says when its driver runs out of memory."""

from __future__ import annotations

from typing import Any


def exhaust_the_driver_heap(spark: Any) -> None:
    """Raise a real ``java.lang.OutOfMemoryError`` of the session's driver JVM, in the Py4J thread (the JVM survives
    it): an array of 2^31 references, 8 GiB, larger than any test heap."""
    jvm = spark.sparkContext._jvm
    jvm.java.lang.reflect.Array.newInstance(jvm.java.lang.Class.forName("java.lang.Object"), 2**31 - 16)
    raise AssertionError("the allocation succeeded")
