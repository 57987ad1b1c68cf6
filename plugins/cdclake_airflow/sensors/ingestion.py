"""Sensor: a source's ingestion has caught up to given Kafka offsets (or to the topics' current end)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator

from cdclake_airflow.triggers.ingestion import IngestionCaughtUpTrigger, _decode


class IngestionCaughtUpSensor(BaseSensorOperator):
    """Wait until the lake's ledger shows ``source`` ingested up to ``target_offsets``.

    Deferrable by default (:class:`IngestionCaughtUpTrigger`). With ``target_offsets=None`` the target
    is each of the source's topics' end offset when the sensor starts (read from Kafka through the
    connector spec's bootstrap servers), i.e. "everything produced so far is in the lake".

    Args:
        source: connector spec name (templated).
        target_offsets: ``{topic: {partition: end_offset}}`` (templated) or None for "current end".
        lake_dir: embedded lake directory (templated); None uses ``CDC_LAKE_*``.
        poll_interval: seconds between checks.
        deferrable: defer to the triggerer (default) or poke in the worker.
    """

    template_fields: Sequence[str] = ("source", "target_offsets", "lake_dir")

    def __init__(
        self,
        *,
        source: str,
        target_offsets: dict[str, dict[str, int]] | None = None,
        lake_dir: str | None = None,
        poll_interval: float = 30.0,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.source = source
        self.target_offsets = target_offsets
        self.lake_dir = lake_dir
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def _target(self) -> dict[str, dict[str, int]]:
        if self.target_offsets is not None:
            return self.target_offsets
        from cdclake.connectors import load_spec
        from cdclake.ingest.sources import KafkaRecordSource, source_topic_patterns

        spec = load_spec(self.source)
        _, latest = KafkaRecordSource(
            spec.kafka_bootstrap_servers, source_topic_patterns(spec.topic_prefix)
        ).watermarks()
        out: dict[str, dict[str, int]] = {}
        for (topic, partition), end in latest.items():
            out.setdefault(topic, {})[str(partition)] = end
        return out

    def execute(self, context: Any) -> Any:
        self.target_offsets = self._target()
        if not self.deferrable:
            return super().execute(context)
        self.defer(
            trigger=IngestionCaughtUpTrigger(self.source, self.target_offsets, self.lake_dir, self.poll_interval),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)),
        )

    def poke(self, context: Any) -> bool:
        from cdclake.ingest.progress import committed_offsets, lagging, lake_from_dir

        missing = lagging(
            committed_offsets(self.source, lake_from_dir(self.lake_dir)), _decode(self.target_offsets or {})
        )
        self.log.info("source %s behind by %s", self.source, {f"{t}/{p}": n for (t, p), n in missing.items()})
        return not missing

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        self.log.info("source %s caught up to %s", self.source, self.target_offsets)
        return event
