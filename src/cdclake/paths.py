"""Where cdclake finds its project files and git-ignored state.

Every location can be overridden by an environment variable:

==================  ==============================  ==========================================
variable            default                         holds
==================  ==============================  ==========================================
``CDC_HOME``        the project checkout            ``include/``, ``dags/``, ``jvm/``
``CDC_JVM_DIR``     ``$CDC_HOME/.cache/jvm``        jars resolved by ``make jars``
``CDC_STACK_DIR``   ``$CDC_HOME/.stack``            local stack data, logs and pid files
``CDC_LAKE_DIR``    ``$CDC_HOME/.lake``             embedded Iceberg catalog and warehouse
==================  ==============================  ==========================================
"""

from __future__ import annotations

import os
from pathlib import Path

from cdclake.exceptions import NotInstalledError

CDC_HOME_ENV = "CDC_HOME"
CDC_JVM_DIR_ENV = "CDC_JVM_DIR"
CDC_STACK_DIR_ENV = "CDC_STACK_DIR"
CDC_LAKE_DIR_ENV = "CDC_LAKE_DIR"


def _looks_like_home(path: Path) -> bool:
    return (path / "pyproject.toml").is_file() and (path / "jvm" / "pom.xml").is_file()


def project_home() -> Path:
    """Return the cdclake project directory.

    Order: ``$CDC_HOME``; the current directory or one of its parents; the checkout this package
    was installed from (editable install).

    Raises:
        NotInstalledError: when no project directory can be found.
    """
    env = os.environ.get(CDC_HOME_ENV)
    if env:
        return Path(env).resolve()
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if _looks_like_home(candidate):
            return candidate
    here = Path(__file__).resolve()
    for candidate in here.parents:
        if _looks_like_home(candidate):
            return candidate
    raise NotInstalledError(
        "cannot find the cdclake project directory (with pyproject.toml and jvm/pom.xml); "
        f"run from the checkout or set {CDC_HOME_ENV}"
    )


def _dir_from_env(env: str, default: str) -> Path:
    value = os.environ.get(env)
    return Path(value).resolve() if value else project_home() / default


def jvm_dir() -> Path:
    """Directory holding the resolved JVM dependencies (``kafka/``, ``connect-plugins/``, ``spark/``)."""
    return _dir_from_env(CDC_JVM_DIR_ENV, ".cache/jvm")


def stack_dir() -> Path:
    """State directory of the local stack."""
    return _dir_from_env(CDC_STACK_DIR_ENV, ".stack")


def lake_dir() -> Path:
    """Directory of the embedded lake (catalog database and warehouse)."""
    return _dir_from_env(CDC_LAKE_DIR_ENV, ".lake")


def jars_in(subdir: str) -> list[Path]:
    """Return the jars of one resolved JVM component, sorted.

    Raises:
        NotInstalledError: when the component has not been resolved yet.
    """
    folder = jvm_dir() / subdir
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise NotInstalledError(
            f"no jars in {folder}; run `make jars` (mvn -s jvm/settings.xml -f jvm/pom.xml package)"
        )
    return jars
