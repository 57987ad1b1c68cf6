"""What every phase of a batch is given: the session, the source, its records, and the phase clock."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdclake.spark import job_description

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdclake.ingest.config import SourceConfig
    from cdclake.ingest.ledger import BatchLedger
    from cdclake.ingest.sources import RecordSource

#: Where a batch runs the steps that overlap its main line: the quarantine read while the ledger is read, the
#: PLANNED row's commit while the batch is decoded (each waited for before anything depends on it).
BACKGROUND = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cdclake-batch")


@dataclass(frozen=True)
class BatchContext:
    """The fixed inputs of one batch. ``phases`` accumulates the seconds spent per phase name."""

    spark: SparkSession
    source: SourceConfig
    records: RecordSource
    ledger: BatchLedger
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.source.name

    def described(self, step: str) -> AbstractContextManager[None]:
        """The Spark jobs this thread starts within the block are described as the source's ``step``
        (``cdclake pg: apply``, :func:`~cdclake.spark.job_description`)."""
        return job_description(self.spark, f"cdclake {self.name}: {step}")

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall-clock seconds to ``phases[phase]``; the Spark jobs the block starts are described
        as the source's phase (:meth:`described`)."""
        t0 = time.monotonic()
        try:
            with self.described(phase):
                yield
        finally:
            self.phases[phase] = self.phases.get(phase, 0.0) + time.monotonic() - t0
