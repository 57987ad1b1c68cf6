"""Start, find and stop the stack's processes through pid files (only what ``up`` started is touched)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdclake.exceptions import PortInUseError, StackError

logger = logging.getLogger(__name__)

#: How long :meth:`ManagedProcess.start` waits for a started program's command line to show its marker.
_EXEC_GRACE_S = 10.0


@dataclass(frozen=True)
class ManagedProcess:
    """One long-running process of the stack, known by its pid file.

    Attributes:
        name: service name (``kafka``, ``connect``, ``postgres``, ``mariadb``).
        pid_file: where the pid of the started process is written.
        log_file: where its stdout and stderr go.
        marker: a string that must appear in ``/proc/<pid>/cmdline``, so that a recycled pid of an
            unrelated process is never mistaken for ours.
    """

    name: str
    pid_file: Path
    log_file: Path
    marker: str

    def pid(self) -> int | None:
        """The pid of our running process, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if _is_ours(pid, self.marker):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def running(self) -> bool:
        return self.pid() is not None

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ) -> int:
        """Start ``argv`` in its own session with output appended to the log file; return its pid.

        Args:
            argv: command line.
            env: extra environment variables (added to the current environment).
            cwd: working directory.
            user: run as this OS user (when started as root), e.g. ``postgres``.

        Raises:
            StackError: when the program cannot be executed.
        """
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=full_env,
                start_new_session=True,
                user=user,
                close_fds=True,
            )
        except OSError as exc:
            raise StackError(f"{self.name}: cannot run {argv[0]}: {exc}") from exc
        finally:
            log.close()
        # Popen may return while the child is still inside execve (vfork): its /proc cmdline can be empty
        # or the parent's for a moment, and pid() would then take the fresh pid file for a stale one
        # and remove it. Wait until the command line is the child's own (or the child is gone).
        deadline = time.monotonic() + _EXEC_GRACE_S
        while time.monotonic() < deadline and _alive(proc.pid) and not _is_ours(proc.pid, self.marker):
            time.sleep(0.01)
        self.pid_file.write_text(f"{proc.pid}\n")
        logger.info("started %s pid=%s log=%s", self.name, proc.pid, self.log_file)
        return proc.pid

    def exited_early(self) -> bool:
        """True when the pid file names a process that is gone (it died during start-up)."""
        return self.pid_file.exists() and not self.running()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop our process (SIGTERM to its process group, SIGKILL after ``timeout_s``).

        Returns:
            True when a process was stopped, False when none was running.
        """
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                break
            time.sleep(0.2)
        else:
            logger.warning("%s pid=%s did not stop in %ss; killing", self.name, pid, timeout_s)
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.5)
        self.pid_file.unlink(missing_ok=True)
        logger.info("stopped %s pid=%s", self.name, pid)
        return True

    def rss_bytes(self) -> int:
        """Resident memory of the process and its descendants, in bytes (0 when not running)."""
        pid = self.pid()
        if pid is None:
            return 0
        return sum(_rss(p) for p in _descendants(pid) | {pid})

    def tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of the log file."""
        if not self.log_file.exists():
            return ""
        with open(self.log_file, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read().decode("utf-8", errors="replace")
        return "\n".join(data.splitlines()[-lines:])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False


def _is_ours(pid: int, marker: str) -> bool:
    if not _alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _descendants(pid: int) -> set[int]:
    tree = _children_map()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on ``host:port`` and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def require_free_port(service: str, host: str, port: int, env_var: str) -> None:
    """Raise :class:`PortInUseError` naming the service, the port and how to change it.

    Raises:
        PortInUseError: when the port is taken.
    """
    if not port_is_free(host, port):
        raise PortInUseError(
            f"{service}: port {host}:{port} is already in use by another process; "
            f"stop that process or choose another port with {env_var}=<port> (or the matching `stack up` option)"
        )


def wait_until(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.5) -> bool:
    """Call ``check()`` until it returns True or ``timeout_s`` passes; exceptions from ``check`` propagate."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
