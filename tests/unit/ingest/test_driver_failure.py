"""A batch whose Spark driver runs out of memory, or whose driver JVM exits, fails with a SparkDriverError that
names the source, the batch, its size and the setting to change; the batch does not commit, and the next run
redoes it."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import Any

import pytest
from driver_failures import exhaust_the_driver_heap
from pyspark.sql import SparkSession

from cdclake.exceptions import SparkDriverError
from cdclake.spark import driver_exited, out_of_memory

from .conftest import RunBatch, rows
from .events import PgTable


def test_out_of_memory_is_found_in_the_exception_or_in_one_it_was_raised_during() -> None:
    java = "An error occurred while calling o1739.getResult.\n: org.apache.spark.SparkException: Job aborted\n"
    oom = RuntimeError(java + "Caused by: java.lang.OutOfMemoryError: Java heap space\n\tat java.base/...")
    try:
        try:
            raise oom
        finally:
            raise ConnectionRefusedError("[Errno 111] Connection refused")  # the cleanup after the JVM died
    except ConnectionRefusedError as exc:
        assert out_of_memory(exc) == "java.lang.OutOfMemoryError: Java heap space"
    assert out_of_memory(RuntimeError(java)) is None


def test_sparks_own_reports_of_the_driver_memory_running_short_are_out_of_memory() -> None:
    """The Java texts of Py4J errors that a follower's 1M-record batches at the 900m heap raised (copied from those
    runs' logs: the batches take minutes and need a 3.5M-row table, too much for a test), and of the memory
    manager's refusal; the Java ``OutOfMemoryError`` wins when both are there."""
    broadcast = (
        "An error occurred while calling o6452.localCheckpoint.\n: org.apache.spark.SparkException: Not enough memory "
        "to build and broadcast the table to all worker nodes. As a workaround, you can either disable broadcast by "
        "setting spark.sql.autoBroadcastJoinThreshold to -1 or increase the spark driver memory by setting "
        "spark.driver.memory to a higher value.\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$."
        "notEnoughMemoryToBuildAndBroadcastTableError(QueryExecutionErrors.scala:2140)"
    )
    assert out_of_memory(RuntimeError(broadcast)) == (
        "Not enough memory to build and broadcast the table to all worker nodes"
    )
    lost = (
        "An error occurred while calling o7374.getResult.\n: org.apache.spark.SparkException: Exception thrown in "
        "awaitResult:\nCaused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
        "79.0 failed 1 times, most recent failure: Lost task 0.0 in stage 79.0 (TID 201) (localhost executor "
        "driver): TaskResultLost (result lost from block manager)"
    )
    assert out_of_memory(RuntimeError(lost)) == "TaskResultLost (result lost from block manager)"
    refused = (
        "Caused by: org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] Unable to acquire "
        "65536 bytes of memory, got 0. SQLSTATE: 53200"
    )
    assert out_of_memory(RuntimeError(refused)) == (
        "org.apache.spark.memory.SparkOutOfMemoryError: [UNABLE_TO_ACQUIRE_MEMORY] Unable to acquire 65536 bytes of "
        "memory, got 0"
    )
    both = RuntimeError(lost + "\nCaused by: java.lang.OutOfMemoryError: Java heap space")
    assert out_of_memory(both) == "java.lang.OutOfMemoryError: Java heap space"
    assert out_of_memory(RuntimeError("Job aborted due to stage failure: Task 0 failed: FetchFailed")) is None


def test_an_error_that_cannot_say_what_it_is_does_not_hide_the_driver_failure() -> None:
    """A Py4J error asks its JVM for the Java error's text: once that JVM has exited (killed by its own
    OutOfMemoryError), ``str`` raises; the search reads what the error was raised with instead."""

    class AskingTheDeadJvm(Exception):
        def __str__(self) -> str:
            raise ConnectionRefusedError("[Errno 111] Connection refused")

    assert out_of_memory(AskingTheDeadJvm("An error occurred while calling o88.collectAsArrowToPython.\n")) is None
    told = AskingTheDeadJvm("java.lang.OutOfMemoryError: Java heap space", 7)
    assert out_of_memory(told) == "java.lang.OutOfMemoryError: Java heap space"


def test_driver_exited_is_the_status_of_a_jvm_this_process_started() -> None:
    def session(proc: Any) -> Any:
        return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=SimpleNamespace(proc=proc)))

    gone = subprocess.Popen(["sh", "-c", "exit 52"])
    gone.wait()
    assert driver_exited(session(gone)) == 52
    with subprocess.Popen(["sleep", "30"]) as alive:
        assert driver_exited(session(alive)) is None
        alive.kill()
    assert driver_exited(session(None)) is None  # started by spark-submit: it is this process's parent


def test_a_batch_that_runs_the_driver_out_of_memory_is_named_and_redone(
    spark: SparkSession, prefix: str, table: PgTable, ingest: RunBatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.ingest import batch

    table.create({"id": 1, "name": "a", "qty": 1}, lsn=100)
    table.create({"id": 2, "name": "b", "qty": 2}, lsn=110)
    monkeypatch.setattr(batch, "decide_transactions", lambda *args: exhaust_the_driver_heap(spark))
    with pytest.raises(SparkDriverError) as failed:
        ingest(table.take())
    message = str(failed.value)
    assert message.startswith(f"source {prefix} batch ")
    assert "the Spark driver ran out of memory (java.lang.OutOfMemoryError: Java heap space)" in message
    assert "on a batch of 2 records" in message and "CDC_SPARK_DRIVER_MEMORY" in message
    monkeypatch.undo()
    summary = ingest()  # the same log, nothing new
    assert (summary.status, summary.redo, summary.records) == ("committed", True, 2)
    assert rows(spark, prefix) == [(1, "a", 1), (2, "b", 2)]
