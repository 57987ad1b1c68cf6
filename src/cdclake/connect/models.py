"""Typed, frozen models of Kafka Connect REST payloads (status, validation, plugins, offsets)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cdclake.exceptions import ConnectorConfigInvalidError


class _ConnectModel(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")


class ConnectorState(StrEnum):
    """State of a connector or task as reported by ``GET /connectors/{name}/status``."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


class WorkerState(_ConnectModel):
    """The connector's own state."""

    state: ConnectorState
    worker_id: str | None = None
    trace: str | None = None


class TaskState(_ConnectModel):
    """One task's state."""

    id: int
    state: ConnectorState
    worker_id: str | None = None
    trace: str | None = None


class ConnectorStatus(_ConnectModel):
    """``GET /connectors/{name}/status``."""

    name: str
    connector: WorkerState
    tasks: tuple[TaskState, ...] = ()
    type: str | None = None

    @property
    def is_running(self) -> bool:
        """The connector and at least one task are RUNNING, and every task is RUNNING."""
        return (
            self.connector.state is ConnectorState.RUNNING
            and bool(self.tasks)
            and all(t.state is ConnectorState.RUNNING for t in self.tasks)
        )

    @property
    def is_failed(self) -> bool:
        """The connector or any task is FAILED."""
        return self.connector.state is ConnectorState.FAILED or bool(self.failed_tasks)

    @property
    def failed_tasks(self) -> tuple[TaskState, ...]:
        """Tasks in state FAILED."""
        return tuple(t for t in self.tasks if t.state is ConnectorState.FAILED)

    def failure_summary(self) -> str:
        """Human-readable summary of what failed, with the worker's stack traces."""
        lines: list[str] = []
        if self.connector.state is ConnectorState.FAILED:
            lines.append(f"connector {self.name} FAILED on {self.connector.worker_id}:\n{self.connector.trace or ''}")
        for task in self.failed_tasks:
            lines.append(f"task {self.name}-{task.id} FAILED on {task.worker_id}:\n{task.trace or ''}")
        return "\n".join(lines)

    def describe(self) -> str:
        """One line: ``name connector=RUNNING tasks=[0:RUNNING]``."""
        tasks = ",".join(f"{t.id}:{t.state.value}" for t in self.tasks)
        return f"{self.name} connector={self.connector.state.value} tasks=[{tasks}]"


class ConfigValueError(_ConnectModel):
    """Errors Connect reported for one config key."""

    name: str
    errors: tuple[str, ...]


class ValidationResult(_ConnectModel):
    """``PUT /connector-plugins/{class}/config/validate``, reduced to what callers need."""

    name: str
    error_count: int
    errors: tuple[ConfigValueError, ...] = ()

    @property
    def ok(self) -> bool:
        """No key has an error."""
        return self.error_count == 0

    @classmethod
    def from_response(cls, body: dict[str, Any]) -> ValidationResult:
        """Parse Connect's validate response (``configs[].value.{name, errors}``)."""
        errors = []
        for item in body.get("configs") or ():
            value = item.get("value") or {}
            messages = tuple(str(m) for m in value.get("errors") or ())
            if messages:
                errors.append(ConfigValueError(name=str(value.get("name")), errors=messages))
        error_count = int(body.get("error_count", len(errors)))
        return cls(name=str(body.get("name", "")), error_count=error_count, errors=tuple(errors))

    def error_lines(self) -> list[str]:
        """``key: message`` lines, one per error."""
        return [f"{e.name}: {message}" for e in self.errors for message in e.errors]

    def raise_for_errors(self, connector: str | None = None) -> None:
        """Raise when Connect reported errors.

        Raises:
            ConnectorConfigInvalidError: listing ``key: message`` lines.
        """
        if self.ok:
            return
        subject = f"connector {connector}" if connector else self.name
        lines = self.error_lines() or [f"{self.error_count} error(s) without a key"]
        raise ConnectorConfigInvalidError(
            f"Kafka Connect rejected the config of {subject} ({self.error_count} error(s)):\n" + "\n".join(lines)
        )


class ConnectorPlugin(_ConnectModel):
    """An installed plugin from ``GET /connector-plugins``."""

    class_name: str = Field(alias="class")
    type: str | None = None
    version: str | None = None


class ConnectorOffset(_ConnectModel):
    """One source partition and its offset from ``GET /connectors/{name}/offsets``."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None = None


class UpsertResult(_ConnectModel):
    """Outcome of ``PUT /connectors/{name}/config``."""

    name: str
    created: bool
    config: dict[str, str] = Field(default_factory=dict)
