"""DAG-level defaults shared by every cdclake DAG (plain data; the DAG files pass them to ``@dag``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

OWNER = "cdclake"
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def default_args(**overrides: Any) -> dict[str, Any]:
    """``default_args`` with the owner and at least two retries (the DAG policy tests enforce both)."""
    args: dict[str, Any] = {
        "owner": OWNER,
        "retries": 2,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=10),
    }
    args.update(overrides)
    return args
