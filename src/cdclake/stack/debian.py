"""Find (or install) the Debian packages the local stack runs: PostgreSQL, MariaDB, a Java 17+ runtime, and
Chromium, the headless browser the tests drive Airflow's UI with (Playwright cannot download its own here).

``cdclake stack packages --install`` (what ``make install`` runs) installs what is missing when run as
root, and otherwise prints the exact command to run.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cdclake.exceptions import NotInstalledError

logger = logging.getLogger(__name__)

PACKAGES = {
    "postgres": ["postgresql"],
    "mariadb": ["mariadb-server", "mariadb-client"],
    "java": ["openjdk-17-jre-headless"],
    "browser": ["chromium"],
}
#: Debian's Chromium, the browser the UI tests launch through Playwright's ``executable_path``.
CHROMIUM = Path("/usr/bin/chromium")
# Debian's maintainer scripts would start system-wide PostgreSQL/MariaDB services; the stack runs its
# own instances, so installs happen with service start-up disabled.
_NO_SERVICE_START_ENV = {"DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}


def install_command(packages: list[str]) -> str:
    """The shell command that installs ``packages``."""
    return f"apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {' '.join(packages)}"


@dataclass(frozen=True)
class Binaries:
    """Paths of the server programs the stack runs."""

    postgres_bin: Path
    mariadbd: Path
    mariadb_install_db: Path
    java: Path


def postgres_bin_dir() -> Path | None:
    """Newest ``/usr/lib/postgresql/<major>/bin`` holding ``postgres`` and ``initdb``."""
    root = Path("/usr/lib/postgresql")
    majors = sorted((int(p.name) for p in root.iterdir() if p.name.isdigit()), reverse=True) if root.is_dir() else []
    for major in majors:
        bin_dir = root / str(major) / "bin"
        if (bin_dir / "postgres").exists() and (bin_dir / "initdb").exists():
            return bin_dir
    return None


def java_major(java: str) -> int | None:
    """Major version of the ``java`` runtime, or None when it cannot be run."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _which(*names: str) -> Path | None:
    for name in names:
        for folder in (None, "/usr/sbin", "/usr/bin"):
            found = shutil.which(name, path=folder) if folder else shutil.which(name)
            if found:
                return Path(found)
    return None


def missing_packages() -> list[str]:
    """Debian packages to install before the stack can run (empty when all is there)."""
    missing: list[str] = []
    if postgres_bin_dir() is None:
        missing += PACKAGES["postgres"]
    if _which("mariadbd", "mysqld") is None or _which("mariadb-install-db", "mysql_install_db") is None:
        missing += PACKAGES["mariadb"]
    java = _which("java")
    if java is None or (java_major(str(java)) or 0) < 17:
        missing += PACKAGES["java"]
    if not CHROMIUM.exists():
        missing += PACKAGES["browser"]
    return missing


def ensure_installed(install: bool) -> None:
    """Install missing packages (root only) or raise with the command to run.

    Raises:
        NotInstalledError: when packages are missing and cannot be installed from here.
    """
    missing = missing_packages()
    if not missing:
        return
    command = install_command(missing)
    if not install or os.geteuid() != 0:
        raise NotInstalledError(f"missing Debian packages {', '.join(missing)}; install them with:\n  sudo {command}")
    logger.info("installing Debian packages: %s", " ".join(missing))
    env = dict(os.environ, **_NO_SERVICE_START_ENV)
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True, env=env)
    still = missing_packages()
    if still:
        raise NotInstalledError(f"after apt-get install, still missing: {', '.join(still)}")


def binaries() -> Binaries:
    """Locate the server programs.

    Raises:
        NotInstalledError: naming what is missing and the command that installs it.
    """
    missing = missing_packages()
    if missing:
        java = _which("java")
        hint = ""
        if "openjdk-17-jre-headless" in missing:
            hint = f" (Java 17+ is required for Kafka and Kafka Connect; found: {java or 'no java on PATH'})"
        raise NotInstalledError(
            f"missing Debian packages {', '.join(missing)}{hint}; run `make install` or:\n  sudo {install_command(missing)}"
        )
    pg = postgres_bin_dir()
    mariadbd = _which("mariadbd", "mysqld")
    install_db = _which("mariadb-install-db", "mysql_install_db")
    java = _which("java")
    assert pg and mariadbd and install_db and java
    return Binaries(postgres_bin=pg, mariadbd=mariadbd, mariadb_install_db=install_db, java=java)
