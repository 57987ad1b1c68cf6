"""`stack up` is idempotent, refuses taken ports clearly, and `stack down` leaves none of our processes.

Runs a second, throw-away stack on other ports in a temporary state directory, so it never touches a
developer's running stack.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdclake.exceptions import PortInUseError
from cdclake.stack import Stack, StackConfig
from cdclake.stack.manager import SERVICE_ORDER
from cdclake.stack.process import PROCESS_TAG_ENV, port_is_free

pytestmark = pytest.mark.integration("stack")


def _our_processes(state_dir: Path) -> list[str]:
    """Processes of the stack: by command line, by working directory (Airflow's processes rewrite their command
    line: every one of them runs in a directory of the state directory), or by the environment tag."""
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
                found.append(f"{proc.name}: {cmdline[:120]} (in {cwd})")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    # pytest's tmp_path is private to root: when run as root, PostgreSQL (run as the 'postgres' user)
    # gets its data directory relocated under /var/lib/cdclake, which this also exercises
    path = tmp_path / "stack"
    yield path
    pointer = path / "postgres.location"
    if pointer.exists():
        shutil.rmtree(Path(pointer.read_text().strip()).parent, ignore_errors=True)


def test_up_is_idempotent_and_down_stops_everything(state_dir: Path) -> None:
    base = StackConfig.from_env(state_dir)
    config = dataclasses.replace(
        base,
        kafka_port=_free_port(),
        kafka_controller_port=_free_port(),
        connect_port=_free_port(),
        postgres_port=_free_port(),
        mariadb_port=_free_port(),
        airflow_port=_free_port(),
    )
    ports = [config.kafka_port, config.kafka_controller_port, config.connect_port, config.postgres_port,
             config.mariadb_port, config.airflow_port]  # fmt: skip
    stack = Stack(config)
    try:
        stack.up()
        first = {row.name: row.pid for row in stack.status()}
        assert all(row.ready for row in stack.status())
        timings = Stack(config).up()  # a second `up` starts nothing
        assert timings == dict.fromkeys(SERVICE_ORDER, 0.0)
        assert {row.name: row.pid for row in Stack(config).status()} == first
        assert len(_our_processes(config.state_dir)) >= len(SERVICE_ORDER)
        # Airflow answers, with the admin's generated password, and lists the project's DAGs
        client = Stack(config).airflow.client()
        assert client.token() and "cdc_connectors" in client.wait_for_dag("cdc_connectors", timeout_s=180)["dag_id"]
        # its metadata database is its own: the role airflow owns database airflow, not the captured one
        with stack.service("postgres").connect() as conn:  # type: ignore[attr-defined]
            owners = dict(conn.execute("SELECT datname, pg_get_userbyid(datdba) FROM pg_database").fetchall())
        assert owners["airflow"] == "airflow" and owners["demo"] == "cdclake_app"
    finally:
        stopped = Stack(config).down()
    assert sorted(stopped) == sorted(SERVICE_ORDER)
    assert _our_processes(config.state_dir) == []
    assert not any(row.running for row in Stack(config).status())
    assert [p for p in ports if not port_is_free(config.host, p)] == []


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
