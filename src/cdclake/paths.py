"""Where cdclake finds its project files and git-ignored state.

Every location can be overridden by an environment variable (read by :mod:`cdclake.settings`):

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

from pathlib import Path

from cdclake.exceptions import NotInstalledError
from cdclake.settings import Settings, settings


def _looks_like_home(path: Path) -> bool:
    return (path / "pyproject.toml").is_file() and (path / "jvm" / "pom.xml").is_file()


def project_home(config: Settings | None = None) -> Path:
    """Return the cdclake project directory.

    Order: ``CDC_HOME`` (of ``config``, default :func:`cdclake.settings.settings`); the current directory or
    one of its parents; the checkout this package was installed from (editable install).

    Raises:
        NotInstalledError: when no project directory can be found.
    """
    home = (config or settings()).home
    if home:
        return home.resolve()
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
        "run from the checkout or set CDC_HOME"
    )


def _location(config: Settings | None, name: str, default: str) -> Path:
    config = config or settings()
    value: Path | None = getattr(config, name)
    return value.resolve() if value else project_home(config) / default


def jvm_dir(config: Settings | None = None) -> Path:
    """Directory holding the resolved JVM dependencies (``kafka/``, ``connect-plugins/``, ``spark/``)."""
    return _location(config, "jvm_dir", ".cache/jvm")


def stack_dir(config: Settings | None = None) -> Path:
    """State directory of the local stack."""
    return _location(config, "stack_dir", ".stack")


def lake_dir(config: Settings | None = None) -> Path:
    """Directory of the embedded lake (catalog database and warehouse)."""
    return _location(config, "lake_dir", ".lake")


def jars_in(subdir: str, target: str = "jars") -> list[Path]:
    """Return the jars of one resolved JVM component, sorted.

    Args:
        subdir: the component's directory under :func:`jvm_dir`.
        target: the ``make`` target that resolves it (``jars``; ``cluster-jars`` for ``spark-s3``).

    Raises:
        NotInstalledError: when the component has not been resolved yet.
    """
    folder = jvm_dir() / subdir
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise NotInstalledError(f"no jars in {folder}; run `make {target}`")
    return jars
