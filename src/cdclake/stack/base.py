"""What every service of the local stack provides to :class:`~cdclake.stack.manager.Stack`."""

from __future__ import annotations

import abc
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import requests

from cdclake.stack.config import StackConfig
from cdclake.stack.debian import Binaries
from cdclake.stack.process import ManagedProcess


@dataclass(frozen=True)
class Endpoint:
    """A port a service listens on, and the variable that changes it."""

    label: str
    port: int
    env_var: str


#: Seconds one HTTP readiness probe waits for its answer.
HTTP_PROBE_TIMEOUT_S = 3.0


def http_answers(url: str, expected: Collection[int] = (200,)) -> bool:
    """One HTTP readiness probe: True when ``url`` answers with one of the ``expected`` statuses.

    Raises:
        requests.HTTPError: on any other status, naming it and the URL (the stack's probe keeps it as what it saw).
        requests.RequestException: when nothing answers.
    """
    response = requests.get(url, timeout=HTTP_PROBE_TIMEOUT_S)
    if response.status_code in expected:
        return True
    raise requests.HTTPError(
        f"{url} answered {response.status_code} {response.reason} (expected {', '.join(map(str, expected))})",
        response=response,
    )


class Service(abc.ABC):
    """One process of the stack: prepared once, started, probed until ready, then bootstrapped."""

    #: short name used in pid/log files and on the command line
    name: str = ""

    def __init__(self, config: StackConfig, bins: Binaries, secrets: dict[str, str]) -> None:
        self.config = config
        self.bins = bins
        self.secrets = secrets
        self.process = ManagedProcess(
            name=self.name,
            pid_file=config.state_dir / "run" / f"{self.name}.pid",
            log_file=self.log_file,
            marker=self.marker,
            workdir=self.workdir,
        )

    @property
    def home(self) -> Path:
        """This service's data directory under the state directory."""
        return self.config.state_dir / self.name

    @property
    def workdir(self) -> Path | None:
        """The directory the service runs in, when it has one of its own (see :class:`ManagedProcess`)."""
        return None

    @property
    def log_file(self) -> Path:
        return self.config.state_dir / "logs" / f"{self.name}.log"

    @property
    @abc.abstractmethod
    def marker(self) -> str:
        """A string in the process's command line identifying it as this stack's instance."""

    @abc.abstractmethod
    def endpoints(self) -> list[Endpoint]:
        """Ports this service listens on."""

    @abc.abstractmethod
    def prepare(self) -> None:
        """First-time set-up (idempotent): data directories, config files, storage formatting.

        Raises:
            StackError: when set-up fails.
        """

    @abc.abstractmethod
    def start(self) -> None:
        """Start the process (assumes :meth:`prepare` ran and the ports are free)."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """One readiness probe: True once the service answers like a client expects."""

    def bootstrap(self) -> None:  # noqa: B027 - optional hook
        """Post-start set-up that needs the running service (users, grants); idempotent."""

    @abc.abstractmethod
    def describe(self) -> str:
        """One line saying where the service listens."""


class JvmService(Service):
    """A service run by a JVM of its own, found by the ``-Dcdclake.stack=<state directory>`` property it runs with."""

    @property
    def marker(self) -> str:
        return f"-Dcdclake.stack={self.config.state_dir}"
