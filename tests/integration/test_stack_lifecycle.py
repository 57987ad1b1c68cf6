"""`stack up` is idempotent, refuses taken ports clearly, and `stack down` leaves none of our processes.

Runs a second, throw-away stack on other ports in a temporary state directory, so it never touches a
developer's running stack.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdclake.exceptions import PortInUseError
from cdclake.stack import Stack, StackConfig

pytestmark = pytest.mark.integration("stack")


def _our_processes(state_dir: Path) -> list[str]:
    markers = [str(state_dir)]
    pointer = state_dir / "postgres.location"
    if pointer.exists():  # PostgreSQL's data directory was relocated (see PostgresService.home)
        markers.append(pointer.read_text().strip())
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(m in cmdline for m in markers):
                found.append(f"{proc.name}: {cmdline[:120]}")
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
    )
    stack = Stack(config)
    try:
        stack.up()
        first = {row.name: row.pid for row in stack.status()}
        assert all(row.ready for row in stack.status())
        timings = Stack(config).up()  # a second `up` starts nothing
        assert timings == {"kafka": 0.0, "postgres": 0.0, "mariadb": 0.0, "connect": 0.0}
        assert {row.name: row.pid for row in Stack(config).status()} == first
        assert len(_our_processes(config.state_dir)) >= 4
    finally:
        stopped = Stack(config).down()
    assert sorted(stopped) == ["connect", "kafka", "mariadb", "postgres"]
    assert _our_processes(config.state_dir) == []
    assert not any(row.running for row in Stack(config).status())


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
