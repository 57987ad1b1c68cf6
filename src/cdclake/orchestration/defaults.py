"""DAG-level defaults shared by every cdclake DAG (plain data; the DAG files pass them to ``@dag``).

Timeouts: every task has an ``execution_timeout`` and every DAG a ``dagrun_timeout``. A task without its own
gets :data:`TASK_TIMEOUT` from :func:`default_args`; the DAG files override it for the tasks that run
longer (a Spark job, a reconciliation, a sensor's wait). Each DAG's ``dagrun_timeout`` is at least its
longest task's ``execution_timeout`` (a sensor's ``timeout``) plus the steps before and after it. In the
manual and daily DAGs it leaves room for all of a task's attempts too; in the DAGs scheduled every few
minutes (ingest, connector health) it does not need to, since the next run, minutes later, does a timed-out
run's work again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

OWNER = "cdclake"
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)

#: ``execution_timeout`` of a task without its own: REST calls to Kafka Connect, reads of Kafka offsets, of
#: the lake's catalog or of a batch summary, a signal insert. Their clients time out each call in seconds
#: and retry a few times, so a task that runs past this hangs rather than works.
TASK_TIMEOUT = timedelta(minutes=5)
#: ``execution_timeout`` of one bounded ingest batch (``jobs/ingest.py``): Spark's start, up to
#: ``--lock-wait`` (5 minutes) for another run of the source to release its lock, then the batch.
INGEST_BATCH_TIMEOUT = timedelta(minutes=25)
#: ``execution_timeout`` of the daily maintenance job (``jobs/maintenance.py``, every table of every source).
MAINTENANCE_TIMEOUT = timedelta(hours=3)
#: ``execution_timeout`` of the reconciliation of one source (full scans of the source and of the lake).
RECONCILE_TIMEOUT = timedelta(minutes=30)


def default_args(**overrides: Any) -> dict[str, Any]:
    """``default_args`` with the owner, at least two retries (the DAG policy tests enforce both), the first after
    ``CDC_TASK_RETRY_DELAY``, and the :data:`TASK_TIMEOUT` execution timeout; ``overrides`` replace any of them."""
    from cdclake.settings import settings

    args: dict[str, Any] = {
        "owner": OWNER,
        "retries": 2,
        "retry_delay": settings().task_retry_delay,
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
        "execution_timeout": TASK_TIMEOUT,
    }
    args.update(overrides)
    return args
