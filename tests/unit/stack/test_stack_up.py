"""Stack.up: when a service never becomes ready, what this call started is stopped again.

The services are stand-ins (a sleeping Python interpreter each), because the test is about the
start-up bookkeeping, not the servers; the processes, pid files and signals are real.
"""

from __future__ import annotations

import socket
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cdclake.exceptions import StackError
from cdclake.stack.base import Endpoint, Service
from cdclake.stack.config import StackConfig
from cdclake.stack.manager import ALL_SERVICES, SERVICE_ORDER, Stack


class _Sleeper(Service):
    answers = True
    error: str | None = None
    ports: tuple[int, ...] = ()

    @property
    def marker(self) -> str:
        return f"cdclake-stack-test-{self.name}-{self.config.state_dir.name}"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("API", port, "CDC_TEST_PORT") for port in self.ports]

    def prepare(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        self.process.start([sys.executable, "-c", "import time; time.sleep(120)", self.marker])

    def ready(self) -> bool:
        if self.error:
            raise ConnectionError(self.error)
        return self.answers

    def describe(self) -> str:
        return self.name


def _stack(
    tmp_path: Path, broken: str, error: str | None = None, ports: tuple[int, ...] = (), **config_: object
) -> Stack:
    config = StackConfig(state_dir=tmp_path / "state", jvm_dir=tmp_path / "jvm", start_timeout_s=2.0)
    config = replace(config, **config_)  # type: ignore[arg-type]
    stack = Stack(config, bins=object())  # type: ignore[arg-type]
    services: dict[str, Service] = {}
    for name in ALL_SERVICES:
        failing = {"answers": False, "error": error, "ports": ports} if name == broken else {}
        cls = type(f"Fake_{name}", (_Sleeper,), {"name": name, **failing})
        services[name] = cls(config, stack._bins, {})  # type: ignore[arg-type]
    stack._services = services
    stack._check_jars = lambda: None  # type: ignore[method-assign]
    return stack


def test_a_service_that_never_answers_fails_up_and_what_was_started_is_stopped(tmp_path: Path) -> None:
    stack = _stack(tmp_path, broken="connect")
    said: list[tuple[str, str]] = []
    with pytest.raises(
        StackError, match=r"connect did not answer within 2s \(its last probe: answered, not ready; pid \d+ running\)"
    ):
        stack.up(lambda name, message: said.append((name, message)))
    assert [s.name for s in stack.status() if s.running] == []
    assert not any((tmp_path / "state" / "run").glob("*.pid"))
    assert {name for name, message in said if message.startswith("stopped")} == set(SERVICE_ORDER)


def test_a_service_whose_probe_keeps_failing_is_reported_with_the_probes_last_error(tmp_path: Path) -> None:
    """The message also says whether the process still runs and whether anything holds its port."""
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    stack = _stack(tmp_path, broken="kafka", error="connection refused", ports=(port,))
    with pytest.raises(
        StackError,
        match=(
            r"kafka did not answer within 2s \(its last probe: ConnectionError: connection refused; "
            rf"pid \d+ running; API port {port} free\)"
        ),
    ):
        stack.up()
    assert [s.name for s in stack.status() if s.running] == []


def test_services_already_running_are_left_running_when_up_fails(tmp_path: Path) -> None:
    stack = _stack(tmp_path, broken="kafka")
    postgres = stack.services["postgres"]
    postgres.prepare()
    postgres.start()  # running before `up`, e.g. from an earlier `stack up`
    try:
        with pytest.raises(StackError, match="kafka did not answer"):
            stack.up()
        assert [s.name for s in stack.status() if s.running] == ["postgres"]
    finally:
        stack.down()
    assert [s.name for s in stack.status() if s.running] == []


def test_the_cluster_profile_starts_its_services_after_the_default_ones_and_down_stops_them(tmp_path: Path) -> None:
    stack = _stack(tmp_path, broken="", stack_profile="cluster", spark_workers=2)
    cluster = ["s3proxy", "iceberg-rest", "spark-master", "spark-worker-1", "spark-worker-2"]
    # `stack down` and `stack status` without --profile: the default profile
    default = Stack(replace(stack.config, stack_profile="default"), bins=object())  # type: ignore[arg-type]
    default._services = stack.services
    said: list[tuple[str, str]] = []
    try:
        stack.up(lambda name, message: said.append((name, message)))
        started = [name for name, message in said if message.startswith("started")]
        assert sorted(started) == sorted([*SERVICE_ORDER, *cluster])
        # the object store and the master before the catalog and the workers that need them
        assert started.index("iceberg-rest") > started.index("s3proxy")
        assert min(started.index("spark-worker-1"), started.index("spark-worker-2")) > started.index("spark-master")
        assert [s.name for s in stack.status() if s.running] == [*SERVICE_ORDER, *cluster]
        # the default profile's status lists the cluster services that run, never one that does not
        stack.services["spark-worker-2"].process.stop(timeout_s=10)
        assert [s.name for s in default.status()] == [*SERVICE_ORDER, *cluster[:-1]]
        assert "spark-worker-2" in [s.name for s in stack.status()]
    finally:
        stopped = default.down()
    assert sorted(stopped) == sorted([*SERVICE_ORDER, *cluster[:-1]])
    assert [s.name for s in stack.status() if s.running] == []


def test_airflow_started_for_the_other_profiles_lake_is_restarted_and_airflow_false_leaves_it(
    tmp_path: Path,
) -> None:
    from cdclake.stack.airflow import COMPONENTS

    default = _stack(tmp_path, broken="")
    cluster = _stack(tmp_path, broken="", stack_profile="cluster")
    cluster._services = default.services
    said: list[tuple[str, str]] = []
    try:
        default.up()
        default.airflow.prepare()  # what the first component's preparation writes: the lake it was started for
        cluster.up(lambda name, message: said.append((name, message)), airflow=False)
        assert not [name for name, message in said if name in COMPONENTS]  # left as they are
        assert [s.name for s in cluster.status() if s.running] == [
            *SERVICE_ORDER,
            *cluster.cluster_names,
        ]
        said.clear()
        cluster.up(lambda name, message: said.append((name, message)))
        restarted = [name for name, message in said if "started for the other profile's lake" in message]
        assert restarted == list(reversed(COMPONENTS))
        assert sorted(name for name, message in said if message.startswith("started")) == sorted(COMPONENTS)
    finally:
        default.down()


def test_status_says_what_the_probe_of_a_running_service_saw_and_probes_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cdclake.stack.manager.STATUS_RETRY_S", 0.0)
    stack = _stack(tmp_path, broken="connect", error="Read timed out")
    kafka = stack.services["kafka"]
    probes: list[bool] = []

    def slow_once() -> bool:  # a probe that times out once, on a busy machine, then answers
        probes.append(True)
        if len(probes) == 1:
            raise TimeoutError("read timed out")
        return True

    kafka.ready = slow_once  # type: ignore[method-assign]
    for name in ("kafka", "connect"):
        stack.services[name].prepare()
        stack.services[name].start()
    try:
        rows = {row.name: row for row in stack.status()}
        assert (rows["connect"].running, rows["connect"].ready) == (True, False)
        assert rows["connect"].probe == "ConnectionError: Read timed out"
        assert (rows["kafka"].ready, rows["kafka"].probe, len(probes)) == (True, "", 2)
        assert (rows["postgres"].running, rows["postgres"].probe) == (False, "")  # stopped: nothing probed
    finally:
        stack.down()


def test_up_without_airflow_starts_the_services_started_by_up_says(tmp_path: Path) -> None:
    from cdclake.stack.airflow import COMPONENTS

    stack = _stack(tmp_path, broken="")
    try:
        stack.up(airflow=False)
        running = [s.name for s in stack.status() if s.running]
        assert running == list(stack.started_by_up(airflow=False))
        assert running and not set(running) & set(COMPONENTS)
        assert stack.started_by_up() == stack.service_names
    finally:
        stack.down()
