"""Bring the local stack up and down, report its status."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdclake.connect import KafkaConnectClient
from cdclake.connectors import ConnectorKind, ConnectorSpec, DatabaseEndpoint
from cdclake.exceptions import StackError
from cdclake.settings import MAX_SPARK_WORKERS
from cdclake.stack.airflow import AIRFLOW_SERVICES, COMPONENTS, AirflowHome
from cdclake.stack.base import Service
from cdclake.stack.cluster import (
    IcebergRestService,
    S3ProxyService,
    SparkMasterService,
    SparkWorkerService,
    cluster_jars,
)
from cdclake.stack.config import StackConfig, connect_auth, load_or_create_secrets
from cdclake.stack.connect import ConnectService
from cdclake.stack.debian import Binaries, binaries
from cdclake.stack.kafka import KafkaService
from cdclake.stack.mariadb import MariaDbService
from cdclake.stack.postgres import PostgresService
from cdclake.stack.process import port_is_free, require_free_port, wait_until

logger = logging.getLogger(__name__)

SERVICE_ORDER = ("postgres", "mariadb", "kafka", "connect", *COMPONENTS)
#: The cluster profile's servers; its workers follow them.
CLUSTER_SERVERS = ("s3proxy", "iceberg-rest", "spark-master")
#: The cluster profile's services beyond :data:`SERVICE_ORDER`, every worker it may start included.
CLUSTER_SERVICES = (*CLUSTER_SERVERS, *(f"spark-worker-{n}" for n in range(1, MAX_SPARK_WORKERS + 1)))
ALL_SERVICES = (*SERVICE_ORDER, *CLUSTER_SERVICES)
Progress = Callable[[str, str], None]
#: Seconds ``status`` waits before probing a running service that did not answer a second time.
STATUS_RETRY_S = 1.0


@dataclass(frozen=True)
class ServiceStatus:
    """What ``stack status`` reports for one service."""

    name: str
    running: bool
    pid: int | None
    ready: bool
    rss_bytes: int
    pss_bytes: int
    where: str
    log_file: str
    #: What the readiness probe last saw when the service runs but is not ready ("" otherwise).
    probe: str = ""


def _noop(service: str, message: str) -> None:
    logger.info("%s: %s", service, message)


class Stack:
    """The local stack under ``config.state_dir``.

    Args:
        config: ports, directories and memory settings.
        bins: server programs; located on first use when omitted.
    """

    def __init__(self, config: StackConfig | None = None, bins: Binaries | None = None) -> None:
        self.config = config or StackConfig.from_env()
        self._bins = bins
        self._services: dict[str, Service] | None = None

    @property
    def secrets(self) -> dict[str, str]:
        return load_or_create_secrets(self.config)

    @property
    def services(self) -> dict[str, Service]:
        """The services, in start order.

        Raises:
            NotInstalledError: when PostgreSQL, MariaDB or Java 17 is missing.
        """
        if self._services is None:
            bins = self._bins or binaries()
            secrets = self.secrets
            classes = (
                PostgresService,
                MariaDbService,
                KafkaService,
                ConnectService,
                *AIRFLOW_SERVICES,
                S3ProxyService,
                IcebergRestService,
                SparkMasterService,
            )
            services: dict[str, Service] = {cls.name: cls(self.config, bins, secrets) for cls in classes}
            for n in range(1, MAX_SPARK_WORKERS + 1):
                services[f"spark-worker-{n}"] = SparkWorkerService(self.config, bins, secrets, index=n)
            self._services = {name: services[name] for name in ALL_SERVICES}
        return self._services

    @property
    def service_names(self) -> tuple[str, ...]:
        """The services ``up`` starts, in start order: :data:`SERVICE_ORDER`, and in the cluster profile the object
        store, the REST catalog, the Spark master and ``CDC_SPARK_WORKERS`` workers."""
        return (*SERVICE_ORDER, *self.cluster_names)

    def started_by_up(self, *, airflow: bool = True) -> tuple[str, ...]:
        """The services ``up(airflow=airflow)`` starts, in start order: :attr:`service_names`, without the Airflow
        components when ``airflow`` is False."""
        return tuple(n for n in self.service_names if airflow or n not in COMPONENTS)

    @property
    def cluster_names(self) -> tuple[str, ...]:
        """The cluster profile's services ``up`` starts: its servers and ``CDC_SPARK_WORKERS`` workers (none in the
        default profile)."""
        if not self.config.cluster:
            return ()
        return (*CLUSTER_SERVERS, *(f"spark-worker-{n}" for n in range(1, self.config.spark_workers + 1)))

    def connect_client(self, **kwargs: Any) -> KafkaConnectClient:
        """A client of the stack's Kafka Connect REST API, with its credentials (keyword arguments as the client's)."""
        return KafkaConnectClient(self.config.connect_url, auth=connect_auth(self.secrets), **kwargs)

    def service(self, name: str) -> Service:
        """One service by name.

        Raises:
            StackError: for an unknown name.
        """
        if name not in ALL_SERVICES:
            raise StackError(f"unknown service {name!r}; services are {', '.join(ALL_SERVICES)}")
        return self.services[name]

    # -- up --------------------------------------------------------------------------------------
    def up(self, progress: Progress = _noop, *, airflow: bool = True) -> dict[str, float]:
        """Start every service that is not running, wait until each answers; idempotent.

        Args:
            progress: told what each service is doing.
            airflow: start the Airflow components, and restart those started for the other profile's lake;
                ``False`` leaves them as they are (a test adding the cluster profile's services to a running stack).

        Returns:
            Seconds each service took until ready (0 for those already running).

        Raises:
            PortInUseError: when a port is taken by a process that is not ours.
            NotInstalledError: when a program or the jars are missing.
            StackError: when a service fails to start or to become ready in time. The services this
                call started are stopped again first (those that were already running are left be),
                so a failed ``up`` leaves nothing behind.
        """
        self._check_jars()
        services = self.services
        for name in self.started_by_up(airflow=airflow):
            service = services[name]
            if service.process.running():
                continue
            for endpoint in service.endpoints():
                require_free_port(f"{name} {endpoint.label}", self.config.host, endpoint.port, endpoint.env_var)
        started: dict[str, float] = {}
        try:
            return self._up(services, started, progress, airflow)
        except BaseException:
            for name in reversed(self.service_names):
                if name in started and services[name].process.stop(timeout_s=60):
                    progress(name, "stopped: the stack did not come up")
            raise

    def _up(
        self, services: dict[str, Service], started: dict[str, float], progress: Progress, airflow: bool
    ) -> dict[str, float]:
        for name in ("postgres", "mariadb", "kafka"):
            self._start(services[name], started, progress)
        timings: dict[str, float] = {}
        self._await(services["kafka"], started, timings, progress)
        self._start(services["connect"], started, progress)
        for name in ("postgres", "mariadb"):
            self._await(services[name], started, timings, progress)
            services[name].bootstrap()
            progress(name, "users and databases in place")
        if self.config.cluster:
            self._up_cluster(services, started, timings, progress)
        if not airflow:
            self._await(services["connect"], started, timings, progress)
            return timings
        if self.airflow.lake_changed():  # started on the other profile's lake: restart them on this one
            for name in reversed(COMPONENTS):
                if services[name].process.stop(timeout_s=60):
                    progress(name, "stopped: it was started for the other profile's lake; starting it again")
        # Airflow's metadata database lives in PostgreSQL (bootstrapped above); the first component's
        # preparation migrates it
        for name in COMPONENTS:
            self._start(services[name], started, progress)
        for name in ("connect", *COMPONENTS):
            self._await(services[name], started, timings, progress)
        services["airflow-api-server"].bootstrap()
        progress("airflow-api-server", "connections and the Spark jobs' pool stored in the metadata database")
        return timings

    def _up_cluster(
        self, services: dict[str, Service], started: dict[str, float], timings: dict[str, float], progress: Progress
    ) -> None:
        """The cluster profile's services: the object store and the Spark master first, then the REST catalog
        (which needs the store and PostgreSQL's catalog database) and the workers (which need the master)."""
        first = ("s3proxy", "spark-master")
        for group in (first, tuple(name for name in self.cluster_names if name not in first)):
            for name in group:
                self._start(services[name], started, progress)
            for name in group:
                self._await(services[name], started, timings, progress)

    def _check_jars(self) -> None:
        from cdclake.paths import jars_in

        jars_in("kafka")
        plugins = self.config.jvm_dir / "connect-plugins"
        if not plugins.is_dir() or not any(plugins.iterdir()):
            from cdclake.exceptions import NotInstalledError

            raise NotInstalledError(f"no Debezium plugins in {plugins}; run `make jars`")
        if self.config.cluster:
            for component in ("s3proxy", "iceberg-rest"):
                cluster_jars(self.config, component)

    def _start(self, service: Service, started: dict[str, float], progress: Progress) -> None:
        if service.process.running():
            progress(service.name, f"already running (pid {service.process.pid()})")
            return
        progress(service.name, "preparing")
        service.prepare()
        started[service.name] = time.monotonic()  # before start(): a start that fails half-way is stopped too
        service.start()
        progress(service.name, f"started (pid {service.process.pid()}), waiting until it answers")

    def _await(
        self, service: Service, started: dict[str, float], timings: dict[str, float], progress: Progress
    ) -> None:
        t0 = started.get(service.name)
        probe = Probe(service)

        def attempt() -> bool:
            if service.process.exited_early() or not service.process.running():
                raise _Exited
            return probe()

        try:
            ok = wait_until(attempt, self.config.start_timeout_s)
        except _Exited:
            raise StackError(
                f"{service.name} exited during start-up; last lines of {service.log_file}:\n{service.process.tail(30)}"
            ) from None
        if not ok:
            raise StackError(
                f"{service.name} did not answer within {self.config.start_timeout_s:.0f}s (its last probe: "
                f"{probe.last}; {_sockets(service, self.config.host)}); see {service.log_file}:\n"
                f"{service.process.tail(30)}"
            )
        timings[service.name] = time.monotonic() - t0 if t0 else 0.0
        if t0:
            progress(service.name, f"ready: {service.describe()}")

    # -- down / status ---------------------------------------------------------------------------
    def down(self, progress: Progress = _noop) -> list[str]:
        """Stop every service this stack started (pid files), in reverse order, those of the cluster profile too.

        Returns:
            Names of the services that were stopped.
        """
        stopped = []
        for name in reversed(ALL_SERVICES):
            service = self.services[name]
            if service.process.stop(timeout_s=60):
                stopped.append(name)
                progress(name, "stopped")
        return stopped

    def database_endpoint(self, spec: ConnectorSpec) -> DatabaseEndpoint:
        """The stack database a spec captures, as Kafka Connect (on the same host) reaches it.

        Raises:
            StackError: for a spec of a database the stack does not run.
        """
        c = self.config
        ports = {ConnectorKind.POSTGRESQL: c.postgres_port, ConnectorKind.MARIADB: c.mariadb_port}
        if spec.connector not in ports:
            raise StackError(f"the local stack runs PostgreSQL and MariaDB, not {spec.connector.value} ({spec.name})")
        return DatabaseEndpoint(c.host, ports[spec.connector])

    @property
    def airflow(self) -> AirflowHome:
        """The stack's Airflow home: its configuration, REST client and the environment it runs with."""
        return AirflowHome(self.config, self.secrets)

    def status(self) -> list[ServiceStatus]:
        """Status of each service of the profile, and of any other that runs (running, pid, answering, memory)."""
        rows = []
        for name in ALL_SERVICES:
            service = self.services[name]
            pid = service.process.pid()
            if name not in self.service_names and pid is None:
                continue
            probe = Probe(service)
            ready = pid is not None and probe.twice(STATUS_RETRY_S)
            rows.append(
                ServiceStatus(
                    name=name,
                    running=pid is not None,
                    pid=pid,
                    ready=ready,
                    rss_bytes=service.process.rss_bytes(),
                    pss_bytes=service.process.pss_bytes(),
                    where=service.describe(),
                    log_file=str(service.log_file),
                    probe="" if ready or pid is None else probe.last,
                )
            )
        return rows


class _Exited(Exception):
    pass


def _sockets(service: Service, host: str) -> str:
    """What holds a service's ports at this moment, for the message of a service that never answered: its
    process still running or not, and for each port whether anything listens on it."""
    ports = ", ".join(
        f"{e.label} port {e.port} {'free' if port_is_free(host, e.port) else 'bound'}" for e in service.endpoints()
    )
    alive = f"pid {service.process.pid()} running" if service.process.running() else "process gone"
    return f"{alive}; {ports}" if ports else alive


class Probe:
    """A service's readiness probe as the stack runs it: an error is an answer, never raised.

    ``last`` says what the last call saw: "" when ready, "answered, not ready", or the error's type and message,
    for the message of a service that never answers and for ``stack status``.
    """

    def __init__(self, service: Service) -> None:
        self.service = service
        self.last = ""

    def __call__(self) -> bool:
        try:
            ready = bool(self.service.ready())
        except Exception as exc:  # noqa: BLE001 - what the probe saw is reported, not raised
            logger.debug("%s not ready yet: %s", self.service.name, exc)
            self.last = f"{type(exc).__name__}: {exc}"
            return False
        self.last = "" if ready else "answered, not ready"
        return ready

    def twice(self, pause_s: float) -> bool:
        """Probe, and once more after ``pause_s`` when the first did not answer: one slow answer on a busy machine
        is not reported as a service that does not answer."""
        if self():
            return True
        time.sleep(pause_s)
        return self()
