"""DAG tests: parse ``dags/`` the way the DAG processor does, without a metadata DB.

``AIRFLOW_HOME`` points at a temporary directory *before* Airflow is first imported, so parsing never
writes into the developer's ``~/airflow``; ``plugins/`` is put on ``sys.path`` as Airflow does.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DAGS_DIR = PROJECT_ROOT / "dags"
PLUGINS_DIR = PROJECT_ROOT / "plugins"

if "airflow" not in sys.modules:
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="cdclake-airflow-home-"))
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
if str(PLUGINS_DIR) not in sys.path:
    sys.path.insert(0, str(PLUGINS_DIR))


def _forbidden(what: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{what} called at DAG parse time with {args!r}; use it inside a task or a template")

    return call


@pytest.fixture(scope="session")
def dag_bag() -> Iterator[Any]:
    """The DagBag of ``dags/``; connections and Variables raise if a DAG file touches them at parse time."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import BaseHook, Variable

    # the stubs guard parsing only: leaving them patched for the rest of the session would break every
    # later test that resolves a connection
    with (
        mock.patch.object(BaseHook, "get_connection", _forbidden("BaseHook.get_connection")),
        mock.patch.object(Variable, "get", _forbidden("Variable.get")),
    ):
        bag = DagBag(dag_folder=str(DAGS_DIR))
    yield bag
