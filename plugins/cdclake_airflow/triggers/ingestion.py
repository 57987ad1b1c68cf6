"""Trigger waiting until a source's ingestion has committed past given Kafka offsets."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

log = logging.getLogger(__name__)


def _decode(target: dict[str, dict[str, int]]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in target.items() for p, o in parts.items()}


class IngestionCaughtUpTrigger(BaseTrigger):
    """Poll the lake's batch ledger until every target partition's committed offset reaches its target.

    Args:
        source: the source (connector spec name) whose ledger rows to read.
        target_offsets: ``{topic: {partition: end_offset}}`` (exclusive ends), JSON-able.
        lake_dir: embedded lake directory (None: the worker's ``CDC_LAKE_*`` environment).
        poll_interval: seconds between polls.
    """

    def __init__(
        self,
        source: str,
        target_offsets: dict[str, dict[str, int]],
        lake_dir: str | None = None,
        poll_interval: float = 30.0,
    ) -> None:
        super().__init__()
        self.source = source
        self.target_offsets = target_offsets
        self.lake_dir = lake_dir
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "source": self.source,
                "target_offsets": self.target_offsets,
                "lake_dir": self.lake_dir,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from cdclake.ingest.progress import committed_offsets, lagging, lake_from_dir

        target = _decode(self.target_offsets)
        read = sync_to_async(committed_offsets)
        while True:
            try:
                missing = lagging(await read(self.source, lake_from_dir(self.lake_dir)), target)
            except Exception as exc:  # noqa: BLE001 - the catalog may not exist yet; keep polling
                log.warning("ingestion progress of %s not readable yet: %s", self.source, exc)
            else:
                if not missing:
                    yield TriggerEvent({"status": "caught_up", "source": self.source})
                    return
                log.info("source %s still behind: %s", self.source, {f"{t}/{p}": n for (t, p), n in missing.items()})
            await asyncio.sleep(self.poll_interval)
