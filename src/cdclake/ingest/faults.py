"""Deterministic crash points for the exactly-once tests.

``CDC_FAULT_AT=<point>`` makes the process exit abruptly (``os._exit(137)``, as if SIGKILLed) when the
job reaches that point: ``planned`` (ledger row written), ``table:N`` (after the N-th table's commit; the
tables applied at once count in the order they finish, the others may be committing),
``tombstones`` (an upsert table's delete tombstones committed, its rows not yet), ``table-partial`` (after the
first of an upsert table's two commits: its MERGE, before its append),
``before-commit`` (all tables applied, ledger not yet committed), ``after-commit``. With ``table-partial``, an
upsert table's writes always take two commits (:func:`splits_writes`); a small batch's are otherwise one MERGE.
With ``CDC_FAULT_ONCE=<file>`` as well, the job crashes only when that file does not exist yet, and creates it
first: the first attempt crashes, a retry (an Airflow task retry) runs through.
Unset (always in production), :func:`crash_point` does nothing.
"""

from __future__ import annotations

import os
import sys

from cdclake.settings import Settings, settings

FAULT_ENV = Settings.env_name("fault_at")


def crash_point(point: str) -> None:
    """Exit abruptly if ``CDC_FAULT_AT`` (of this process's :func:`cdclake.settings.settings`) names this point
    (and, with ``CDC_FAULT_ONCE``, no earlier attempt crashed)."""
    current = settings()
    if current.fault_at != point:
        return
    if current.fault_once is not None:
        try:
            current.fault_once.parent.mkdir(parents=True, exist_ok=True)
            with current.fault_once.open("x") as marker:  # only one attempt creates it
                marker.write(f"{point}\n")
        except FileExistsError:
            return
    sys.stderr.write(f"cdclake: injected crash at {point}\n")
    sys.stderr.flush()
    os._exit(137)


def splits_writes() -> bool:
    """Whether ``CDC_FAULT_AT`` is ``table-partial``: an upsert table's writes then take their two commits
    (:func:`cdclake.ingest.tables.TableApplier._write_upsert`), even where one MERGE would do, so that the crash
    point lies between them."""
    return settings().fault_at == "table-partial"
