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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdclake.exceptions import PortInUseError, StackError

logger = logging.getLogger(__name__)

#: How long :meth:`ManagedProcess.start` waits for a started program's command line to show its marker.
_EXEC_GRACE_S = 10.0
#: Environment variable every started process gets (and its descendants inherit): ``<pid file>``. ``stop`` also
#: finds by it the descendants that left the process tree (orphans re-parented to init, task processes that
#: moved to a process group of their own) and stops them too.
PROCESS_TAG_ENV = "CDCLAKE_STACK_PROCESS"
#: How long :meth:`ManagedProcess.stop` gives the descendants left after the main process to exit on SIGTERM.
_DESCENDANT_GRACE_S = 10.0


@dataclass(frozen=True)
class ManagedProcess:
    """One long-running process of the stack, known by its pid file.

    The pid file holds the pid and the process's start time (``/proc/<pid>/stat``), which together name one
    process for good: a recycled pid of an unrelated process is never mistaken for ours.

    Attributes:
        name: service name (``kafka``, ``connect``, ``postgres``, ``mariadb``, ``airflow-scheduler``, ...).
        pid_file: where the pid of the started process is written.
        log_file: where its stdout and stderr go.
        marker: a string in ``/proc/<pid>/cmdline`` of the process (checked for a pid file without a start time).
        workdir: when set, the process runs in this directory, and any process found there is one of its
            descendants (programs that rewrite their command line and environment, like Airflow's, are found
            by it once they left the process tree).
    """

    name: str
    pid_file: Path
    log_file: Path
    marker: str
    workdir: Path | None = None

    def pid(self) -> int | None:
        """The pid of our running process, or None (a stale pid file is removed)."""
        try:
            fields = self.pid_file.read_text().split()
            pid = int(fields[0])
            started = int(fields[1]) if len(fields) > 1 else None
        except (FileNotFoundError, IndexError, ValueError):
            return None
        ours = _alive(pid) and _start_time(pid) == started if started is not None else _is_ours(pid, self.marker)
        if ours:
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
        inherit_env: bool = True,
    ) -> int:
        """Start ``argv`` in its own session with output appended to the log file; return its pid.

        Args:
            argv: command line.
            env: extra environment variables (added to the current environment).
            inherit_env: False: ``env`` is the whole environment (no variable of this process is passed on).
            cwd: working directory (default :attr:`workdir`).
            user: run as this OS user (when started as root), e.g. ``postgres``.

        Raises:
            StackError: when the program cannot be executed.
        """
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        full_env = dict(os.environ) if inherit_env else {}
        if env:
            full_env.update(env)
        full_env[PROCESS_TAG_ENV] = self.tag
        if cwd is None and self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True)
            cwd = self.workdir
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
        # Popen may return while the child is still inside execve (vfork): wait until the command line is the
        # child's own (or the child is gone), so that what the log and `status` show is the program's
        deadline = time.monotonic() + _EXEC_GRACE_S
        while time.monotonic() < deadline and _alive(proc.pid) and not _is_ours(proc.pid, self.marker):
            time.sleep(0.01)
        self.pid_file.write_text(f"{proc.pid} {_start_time(proc.pid) or ''}\n")
        logger.info("started %s pid=%s log=%s", self.name, proc.pid, self.log_file)
        return proc.pid

    def started_at(self) -> float | None:
        """When our running process started (seconds since the epoch), or None."""
        pid = self.pid()
        ticks = _start_time(pid) if pid is not None else None
        if ticks is None:
            return None
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
        return None

    @property
    def tag(self) -> str:
        """The value of :data:`PROCESS_TAG_ENV` in this process's environment and its descendants'."""
        return str(self.pid_file)

    def exited_early(self) -> bool:
        """True when the pid file names a process that is gone (it died during start-up)."""
        return self.pid_file.exists() and not self.running()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop our process and every process it started.

        SIGTERM goes to the process group; SIGKILL follows after ``timeout_s``. The descendants seen while it
        stops (also those in process groups of their own, like Airflow's task processes and the
        ``spark-submit`` they run) and any process still carrying this process's tag (:data:`PROCESS_TAG_ENV`)
        get SIGTERM next, and SIGKILL after a grace period: nothing started by the service outlives it.

        Returns:
            True when a process was stopped, False when none was running (strays are stopped all the same).
        """
        pid = self.pid()
        seen = _identities(self._tagged())
        if pid is None:
            if seen:
                logger.warning("%s: stopping %d leftover process(es) of an earlier run", self.name, len(seen))
                _stop_all(seen, _DESCENDANT_GRACE_S)
            return False
        seen.update(_identities(_descendants(pid)))
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                break
            seen.update(_identities(_descendants(pid)))
            time.sleep(0.2)
        else:
            logger.warning("%s pid=%s did not stop in %ss; killing", self.name, pid, timeout_s)
            seen.update(_identities(_descendants(pid)))
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.5)
        seen.update(_identities(self._tagged()))
        seen.pop(pid, None)
        _stop_all(seen, _DESCENDANT_GRACE_S)
        self.pid_file.unlink(missing_ok=True)
        logger.info("stopped %s pid=%s", self.name, pid)
        return True

    def _tagged(self) -> set[int]:
        """Processes whose environment carries this process's tag, or that run in its :attr:`workdir`."""
        needle = f"{PROCESS_TAG_ENV}={self.tag}".encode()
        workdir = str(self.workdir) if self.workdir is not None else None
        found = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if workdir is not None and os.readlink(entry / "cwd") == workdir:
                    found.add(int(entry.name))
                    continue
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.add(int(entry.name))
        return found

    def pss_bytes(self) -> int:
        """Proportional memory of the process and its descendants, in bytes (0 when not running).

        Unlike RSS, pages shared by forked workers (Airflow's LocalExecutor forks its workers) are counted once.
        """
        pid = self.pid()
        if pid is None:
            return 0
        return sum(_pss(p) for p in _descendants(pid) | {pid})

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

    def follow(self, poll_s: float = 0.5) -> Iterator[str]:
        """The lines written to the log file from this call on, as they come (endless; ``poll_s`` between
        reads that find nothing new; closing the iterator closes the file).

        Raises:
            FileNotFoundError: when the log file does not exist.
        """
        fh = open(self.log_file, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by the iterator
        fh.seek(0, os.SEEK_END)

        def lines() -> Iterator[str]:
            with fh:
                while True:
                    line = fh.readline()
                    if line:
                        yield line
                    else:
                        time.sleep(poll_s)

        return lines()


def _alive(pid: int) -> bool:
    """True while the process, or any of its threads, has not exited.

    A killed multi-threaded process (a JVM) shows its main thread as a zombie while its other threads are still
    exiting and holding its resources (its listening sockets among them): it counts as alive until they are gone.
    """
    state = _state(f"/proc/{pid}/stat")
    if state is None:
        return False
    if state != "Z":
        return True
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_state(f"/proc/{pid}/task/{tid}/stat") not in (None, "Z") for tid in threads if tid != str(pid))


def _state(stat_path: str) -> str | None:
    """The state letter of a ``/proc/.../stat`` file (``R``, ``S``, ``Z``, ...), or None when it is gone."""
    try:
        with open(stat_path) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _is_ours(pid: int, marker: str) -> bool:
    if not _alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return marker in cmdline


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (with the pid, it names one process for good)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _identities(pids: set[int]) -> dict[int, int]:
    """pid -> start time of those still there."""
    out = {}
    for pid in pids:
        started = _start_time(pid)
        if started is not None:
            out[pid] = started
    return out


def _still(identities: dict[int, int]) -> dict[int, int]:
    """The processes of ``identities`` still alive (a pid reused by another process is not ours)."""
    return {pid: t for pid, t in identities.items() if _start_time(pid) == t and _alive(pid)}


def _stop_all(identities: dict[int, int], grace_s: float) -> None:
    """SIGTERM each process (and its group when it leads one), SIGKILL what is left after ``grace_s``."""
    left = _still(identities)
    if not left:
        return
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGTERM)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _still(left)
    for pid in left:
        logger.warning("pid=%s did not stop on SIGTERM in %ss; killing", pid, grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


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


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
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
