"""``airflow dags test`` against the local stack, in a throw-away AIRFLOW_HOME and lake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cdclake.stack import Stack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DAGS_TEST_TIMEOUT_S = 420


def airflow_test_env(stack: Stack, home: Path, lake: Path, runs: Path) -> dict[str, str]:
    """Environment of ``airflow`` subprocesses: ``home`` as AIRFLOW_HOME (its SQLite DB migrated here), ``lake`` as
    the embedded lake, ``runs`` for the jobs' summaries, and the stack's connections."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    # the stack's connections as AIRFLOW_CONN_* (signal writers, readers, Kafka Connect, Spark); not its
    # airflow.cfg, its metadata database or its Spark pool, which belong to the stack's own Airflow
    stack_env = stack.airflow.client_environment(connections=True)
    env.update({k: v for k, v in stack_env.items() if k not in {"AIRFLOW_CONFIG", "CDC_SPARK_POOL"}})
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW_CONFIG": str(home / "airflow.cfg"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "CDC_LAKE_DIR": str(lake),
            "CDC_RUN_DIR": str(runs),
            "CDC_HOME": str(PROJECT_ROOT),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("CDC_LAKE_KIND", None)
    migrate = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    return env


def run_dags_test(env: dict[str, str], dag_id: str, conf: dict[str, object] | None = None) -> tuple[bool, str]:
    """Run ``airflow dags test``; returns whether the run succeeded, and its output."""
    cmd = [str(VENV_BIN / "airflow"), "dags", "test", dag_id]
    if conf is not None:
        cmd += ["-c", json.dumps(conf)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=DAGS_TEST_TIMEOUT_S, cwd=PROJECT_ROOT)
    output = proc.stdout + proc.stderr
    print(f"airflow dags test {dag_id}: rc={proc.returncode} in {time.monotonic() - t0:.1f}s")
    if os.environ.get("CDC_TEST_LOG_DIR"):  # keep the full output for debugging
        Path(os.environ["CDC_TEST_LOG_DIR"], f"{dag_id}.log").write_text(output)
    succeeded = proc.returncode == 0 and "state=success" in output.replace("state=DagRunState.SUCCESS", "state=success")
    return succeeded, output
