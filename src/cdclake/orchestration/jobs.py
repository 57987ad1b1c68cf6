"""Where the spark-submit entry points live and how their arguments and per-run files are built."""

from __future__ import annotations

import re
from pathlib import Path

from cdclake.paths import project_home

JOBS_DIR = "jobs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def job_application(job: str, home: Path | None = None) -> str:
    """Absolute path of ``jobs/<job>.py`` in the project (``$CDC_HOME`` in the Airflow image).

    Raises:
        NotInstalledError: when the project directory cannot be found.
    """
    return str((home or project_home()) / JOBS_DIR / f"{job}.py")


def job_arguments(
    spec: str,
    *,
    summary_json: str | None = None,
    max_records: int | None = None,
    lake: str | None = None,
    extra: dict[str, str | int | bool | None] | None = None,
) -> list[str]:
    """``application_args`` of a cdclake job: ``--spec S [--max-records N] [--lake DIR] [--summary-json P] ...``.

    ``extra`` adds ``--key value`` pairs (``True`` adds a bare flag; ``None``/``False`` is left out);
    underscores in keys become dashes.
    """
    args = ["--spec", spec]
    if max_records is not None:
        args += ["--max-records", str(int(max_records))]
    if lake:
        args += ["--lake", lake]
    for key, value in (extra or {}).items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    if summary_json:
        args += ["--summary-json", summary_json]
    return args


def run_file(base: Path, dag_id: str, run_id: str, task_id: str, map_index: int = -1, suffix: str = ".json") -> Path:
    """A per-task-run file path: ``<base>/<dag_id>/<run_id>/<task_id>[.<map_index>]<suffix>``.

    Unsafe characters in ids (``:`` and ``+`` of run ids) become ``_``.
    """
    name = _UNSAFE.sub("_", task_id) + (f".{map_index}" if map_index is not None and map_index >= 0 else "")
    return base / _UNSAFE.sub("_", dag_id) / _UNSAFE.sub("_", run_id) / f"{name}{suffix}"
