"""`stack up` is idempotent, refuses taken ports clearly, and `stack down` leaves none of our processes, those of the
cluster profile included.

Runs a second, throw-away stack on other ports in a temporary state directory, so it never touches a
developer's running stack.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdclake.exceptions import PortInUseError
from cdclake.stack import Stack, StackConfig
from cdclake.stack.config import CLUSTER_PORTS, PORTS
from cdclake.stack.process import PROCESS_TAG_ENV, port_is_free

pytestmark = pytest.mark.integration("stack")


def _our_processes(state_dir: Path, width: int = 120) -> list[str]:
    """Processes of the stack: by command line, by working directory (Airflow's processes rewrite their command
    line: every one of them runs in a directory of the state directory, as Spark's executors run in their worker's),
    or by the environment tag; each shown with the first ``width`` characters of its command line."""
    markers = [str(state_dir)]
    pointer = state_dir / "postgres.location"
    if pointer.exists():  # PostgreSQL's data directory was relocated (see PostgresService.home)
        markers.append(pointer.read_text().strip())
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                cwd = os.readlink(proc / "cwd")
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if (
                any(m in cmdline for m in markers)
                or any(cwd.startswith(m) for m in markers)
                or f"{PROCESS_TAG_ENV}={state_dir}".encode() in environ
            ):
                found.append(f"{proc.name}: {cmdline[:width]} (in {cwd})")
    return found


def _free_ports(names: tuple[str, ...], workers: int) -> dict[str, int]:
    """A free loopback port for each setting in ``names``, consecutive, with the ``workers`` ports after
    ``spark_ui_port`` (the workers' web UIs) free too. Chosen below the kernel's ephemeral range, so no outgoing
    connection can take one between this choice and `stack up`."""
    ordered = sorted(names, key=lambda name: name == "spark_ui_port")  # the workers' UIs follow the master's
    count = len(ordered) + workers
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(500):
        start = random.randrange(10_000, ephemeral_low - count)
        if all(port_is_free("127.0.0.1", port) for port in range(start, start + count)):
            return {name: start + i for i, name in enumerate(ordered)}
    raise AssertionError(f"no {count} consecutive free ports between 10000 and {ephemeral_low}")


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    # pytest's tmp_path is private to root: when run as root, PostgreSQL (run as the 'postgres' user)
    # gets its data directory relocated under /var/lib/cdclake, which this also exercises
    path = tmp_path / "stack"
    yield path
    pointer = path / "postgres.location"
    if pointer.exists():
        shutil.rmtree(Path(pointer.read_text().strip()).parent, ignore_errors=True)


#: A Spark application that holds an executor on the master given as its argument until it is killed.
HOLD_AN_EXECUTOR = """
import sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[1]).appName("cdclake-lifecycle")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.executor.memory", "512m").config("spark.cores.max", "1").getOrCreate())
assert spark.range(100).count() == 100
print("executing", flush=True)
time.sleep(900)
"""


def test_up_is_idempotent_and_down_stops_everything(state_dir: Path) -> None:
    """On the cluster profile: `stack down` stops the Spark master, the worker and the executor it runs for a live
    application, the REST catalog and the object store too."""
    base = StackConfig.from_env(state_dir)
    ports = _free_ports((*PORTS, *CLUSTER_PORTS), workers=1)
    # a second whole stack starts beside the suite's on 2 cores: its services may take longer than the default
    # 120 s to answer (the REST catalog's JVM once did in CI), which is not what this test is about
    config = dataclasses.replace(base, **ports, stack_profile="cluster", spark_workers=1, start_timeout_s=300.0)
    stack = Stack(config)
    driver: subprocess.Popen[str] | None = None
    try:
        stack.up()
        rows = stack.status()
        first = {row.name: row.pid for row in rows}
        assert [(row.name, row.probe) for row in rows if not row.ready] == []
        timings = Stack(config).up()  # a second `up` starts nothing
        assert timings == dict.fromkeys(stack.service_names, 0.0)
        assert {row.name: row.pid for row in Stack(config).status()} == first
        assert len(_our_processes(config.state_dir)) >= len(stack.service_names)
        # Airflow answers, with the admin's generated password, and lists the project's DAGs
        client = Stack(config).airflow.client()
        assert client.token() and "cdc_connectors" in client.wait_for_dag("cdc_connectors", timeout_s=180)["dag_id"]
        # its metadata database is its own: the role airflow owns database airflow, not the captured one
        with stack.service("postgres").connect() as conn:  # type: ignore[attr-defined]
            owners = dict(conn.execute("SELECT datname, pg_get_userbyid(datdba) FROM pg_database").fetchall())
        assert owners["airflow"] == "airflow" and owners["demo"] == "cdclake_app"
        # an application running on the worker when the stack stops: its executor must stop with it
        driver = subprocess.Popen(
            [sys.executable, "-c", HOLD_AN_EXECUTOR, config.spark_master_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert driver.stdout is not None and driver.stdout.readline().strip() == "executing"
        assert any("CoarseGrainedExecutorBackend" in p for p in _our_processes(config.state_dir, width=100_000))
    finally:
        down = subprocess.run(
            [str(Path(sys.executable).parent / "cdclake"), "stack", "down", "--state-dir", str(config.state_dir)],
            capture_output=True,
            text=True,
        )
        if driver is not None:
            driver.kill()
            driver.wait()
    assert down.returncode == 0, down.stdout + down.stderr
    # one progress line per service stopped ("<name> stopped"), then the summary
    assert sorted(line.split()[0] for line in down.stdout.splitlines() if line.endswith(" stopped")) == sorted(
        stack.service_names
    ), down.stdout
    assert _our_processes(config.state_dir) == []
    assert not any(row.running for row in Stack(config).status())
    assert [p for p in ports.values() if not port_is_free(config.host, p)] == []


def test_up_names_the_taken_port_and_how_to_change_it(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        config = dataclasses.replace(StackConfig.from_env(tmp_path / "stack"), postgres_port=port)
        with pytest.raises(
            PortInUseError, match=rf"postgres PostgreSQL: port 127\.0\.0\.1:{port} is already in use.*CDC_POSTGRES_PORT"
        ):
            Stack(config).up()
    assert _our_processes(config.state_dir) == []
