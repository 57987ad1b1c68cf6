"""Every error cdclake raises. Each names what failed and how to fix it.

Record-level errors carry the Kafka coordinates (topic, partition, offset) of the offending record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class CdcError(Exception):
    """Base class of every cdclake error."""


class ConfigError(CdcError, ValueError):
    """A configuration value is missing or invalid; the message names the key (and file or env var)."""


class NotInstalledError(CdcError, RuntimeError):
    """A required program, package or jar is not installed; the message says how to install it."""


class StackError(CdcError, RuntimeError):
    """A service of the local stack could not be started, reached or stopped."""


class PortInUseError(StackError):
    """A port the local stack needs is already taken by another process."""


# --- connector specs, Kafka Connect REST, Debezium signals (cdclake.connectors / .connect / .signals) ---


class ConnectorSpecError(ConfigError):
    """A connector spec (include/connectors/*.yaml) is invalid; the message names the file and the key path."""


class ConnectError(CdcError):
    """Base class of Kafka Connect REST errors; carries the worker URL and, when known, the HTTP status."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class ConnectUnavailableError(ConnectError, ConnectionError):
    """The Kafka Connect worker could not be reached (connection refused, DNS, timeout)."""


class ConnectTimeoutError(ConnectUnavailableError, TimeoutError):
    """A Kafka Connect REST call timed out (connect or read timeout)."""


class ConnectBadRequestError(ConnectError, ValueError):
    """Kafka Connect rejected the request (HTTP 400), e.g. a malformed config."""


class ConnectAuthenticationError(ConnectError, PermissionError):
    """Kafka Connect refused the credentials (HTTP 401/403)."""


class ConnectorNotFoundError(ConnectError, LookupError):
    """The connector, task or plugin does not exist on the Kafka Connect cluster (HTTP 404)."""


class ConnectRebalanceInProgressError(ConnectError):
    """Kafka Connect is rebalancing or its config is stale (HTTP 409); retry later."""


class ConnectServerError(ConnectError):
    """Kafka Connect failed internally (HTTP 5xx)."""


class ConnectorConfigInvalidError(ConnectError, ValueError):
    """Kafka Connect's validate endpoint reported errors; the message lists ``key: message`` lines."""


class ConnectorFailedError(ConnectError):
    """A connector or one of its tasks is FAILED; the message carries the worker's stack trace."""


class SignalValidationError(CdcError, ValueError):
    """A Debezium signal is invalid for its connector spec (unknown data collection, bad filter, ...)."""


class SignalDeliveryError(CdcError, RuntimeError):
    """A Debezium signal could not be written to the signal table or produced to the signal topic."""


class NotificationDecodeError(CdcError, ValueError):
    """A record of the Debezium notification topic could not be decoded; carries its Kafka coordinates."""

    def __init__(
        self, message: str, *, topic: str | None = None, partition: int | None = None, offset: int | None = None
    ) -> None:
        coords = f" (topic={topic}, partition={partition}, offset={offset})" if topic is not None else ""
        super().__init__(message + coords)
        self.topic = topic
        self.partition = partition
        self.offset = offset


# --- decoding Debezium envelopes (cdclake.decode / cdclake.dialects) ---


class DecodeError(CdcError, ValueError):
    """A Debezium record or Connect schema could not be decoded; records go to dead letters instead."""


class UnsampledRecordsError(DecodeError):
    """A batch decoded from a discovery sample holds records the sample did not show (a topic or a schema
    version): it must be decoded again with discovery by a pass (``decode_records(..., sample_only=False)``,
    which :func:`cdclake.decode.decode_counted` does by itself)."""


class UnsupportedDialectError(DecodeError, LookupError):
    """No dialect is registered for a ``source.connector`` value; register one in ``cdclake.dialects``."""


class ConnectSchemaError(DecodeError):
    """A Kafka Connect schema is invalid or cannot be mapped to Spark (e.g. a Decimal without ``scale``)."""


class SchemaSourceError(DecodeError, LookupError):
    """With ``schemas.enable=false`` no column types are known for a topic; configure the schema source."""


class SnapshotAbortedError(CdcError, RuntimeError):
    """Debezium reported an ABORTED notification for the snapshot a signal started."""


# --- ingestion (cdclake.ingest) ---


class RecordSourceError(CdcError, RuntimeError):
    """Records could not be listed or read (broker unreachable, unreadable replay file)."""


class ReplayFileError(ConfigError):
    """A line of a recorded-records file (``cdclake replay``'s JSON Lines) is not a record in a format replay
    reads, or contradicts an earlier record at the same Kafka coordinates; the message starts with
    ``file:line`` and says what is wrong with the line."""

    def __init__(self, message: str, *, path: str, line: int) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


class OffsetGapError(CdcError, LookupError):
    """The log of a topic-partition no longer holds the offset the source continues from: records were deleted
    before they were ingested (retention, ``kafka-delete-records``), or the topic was re-created or its log
    truncated. Raised before anything is read; the message names every such topic-partition with the missing
    offsets, and says how to accept the loss (``--accept-gap TOPIC:PARTITION``).

    Attributes:
        gaps: the :class:`cdclake.ingest.offsets.OffsetGap` of each topic-partition, sorted.
    """

    def __init__(self, message: str, *, gaps: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.gaps = list(gaps)


class SparkDriverError(CdcError, RuntimeError):
    """The Spark driver ran out of memory, or its JVM exited, during a batch or a maintenance run; the message
    names the source, the batch and its size (or the table being maintained), and says which setting to change.
    A batch did not commit; the next run redoes it."""


class SchemaEvolutionError(CdcError, ValueError):
    """A table's schema changed in a way its policy does not allow."""


class QuarantineReleaseError(CdcError, ValueError):
    """A quarantined table cannot be released as asked; the message names the table and what to do first."""


# --- source databases (cdclake.databases) and reconciliation (cdclake.reconcile) ---


class SourceDatabaseError(CdcError, ConnectionError):
    """A source database could not be reached or read; the message names the connection (never its password)
    and what to check."""


class ReconcileError(CdcError, RuntimeError):
    """The source database or the lake could not be read for reconciliation."""


class AirflowApiError(CdcError, RuntimeError):
    """Airflow's REST API refused a call or did not answer; carries the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SourceBusyError(CdcError, RuntimeError):
    """Another run holds the source's ingestion lock; the message names the holder and since when."""
