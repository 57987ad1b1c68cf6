"""The ingestion job: bounded Kafka offset ranges -> decoded changes -> ordered, exactly-once MERGE into Iceberg."""

from __future__ import annotations
