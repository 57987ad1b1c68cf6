"""SparkSubmitOperator for the project's jobs (``jobs/<job>.py``) with the lake's session settings."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook

from cdclake import cds
from cdclake.ingest.lock import LOCK_LABEL_ENV
from cdclake.lake import LakeConfig
from cdclake.orchestration import job_application, run_file
from cdclake.orchestration.deployment import spark_pool
from cdclake.settings import settings
from cdclake.spark import session_conf, with_driver_options
from cdclake_airflow.connections import AirflowNotFoundException


def run_dir() -> Path:
    """Where per-run job summaries go: ``$CDC_RUN_DIR``, default ``<tmp>/cdclake-runs``."""
    return settings().run_dir or Path(tempfile.gettempdir()) / "cdclake-runs"


class CdcSparkJobOperator(SparkSubmitOperator):
    """Run ``jobs/<job>.py`` with ``spark-submit``, the project's jars and the lake's catalog settings.

    At execute time (never at parse time, so no lake secret ends up in the serialized DAG):

    * ``application`` defaults to ``$CDC_HOME/jobs/<job>.py``;
    * ``jars`` defaults to the session's ``spark.jars`` (:func:`cdclake.spark.session_conf`): the project's
      Spark jars, and Iceberg's AWS bundle on an S3 lake;
    * ``conf`` is :func:`cdclake.spark.session_conf` of ``LakeConfig.from_env()`` (the ``lake``
      catalog), updated with the ``conf`` given here; unless the deploy mode is ``cluster``, the driver
      maps this machine's class-data sharing archive when there is one (:mod:`cdclake.cds`);
    * with ``summary_json`` (default), ``--summary-json <per-run path>`` is appended to
      ``application_args`` and the parsed summary is returned (XCom): ``{"summary_path", "summary"}``.
      The job writes it on the driver, so this needs client deploy mode (the connection's default);
    * ``CDC_LOCK_LABEL`` names the task run to any other run that waits for the source's lock the job holds;
    * each Airflow connection of ``connections`` that exists is handed to the job as ``AIRFLOW_CONN_<ID>``
      (its URI), where :func:`cdclake.databases.resolve_connection` finds it: the ingest job of a schemas-off
      source reads column types from the source database through the spec's reader connection. A connection
      that does not exist is left out (the job then uses the local stack's). Neither is done in cluster
      deploy mode, where the driver does not run here.

    The master comes from the Spark connection (``conn_id``, default ``spark_default``): ``local[*]``
    on the local stack, ``spark://spark-master:7077`` in docker-compose. The task's pool defaults to the
    deployment's Spark pool (``CDC_SPARK_POOL``, :func:`cdclake.orchestration.deployment.spark_pool`).

    Args:
        job: the job's module name under ``jobs/`` (``ingest``, ``maintenance``).
        summary_json: pass ``--summary-json`` and return the summary.
        connections: Airflow connection ids to hand to the job (see above).
        **kwargs: SparkSubmitOperator arguments (``application_args`` etc. are templated).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "job")
    ui_color = "#ffe8a3"

    def __init__(self, *, job: str, summary_json: bool = True, connections: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("conn_id", "spark_default")
        kwargs.setdefault("pool", spark_pool())
        kwargs.setdefault("name", f"cdclake-{job}")
        kwargs.setdefault("application", "")
        super().__init__(**kwargs)
        self.job = job
        self.summary_json = summary_json
        self.connections = tuple(connections)

    def _prepare(self, context: Any) -> Path | None:
        if not self.application:
            self.application = job_application(self.job)
        if not Path(self.application).is_file():
            raise FileNotFoundError(f"spark job {self.job}: application {self.application} does not exist")
        lake = LakeConfig.from_env()
        lake.ensure_dirs()
        conf = session_conf(lake)
        # spark-submit's --jars replaces spark.jars: the same list (an S3 lake adds Iceberg's AWS bundle)
        self.jars = self.jars or conf["spark.jars"]
        if self._deploy_mode != "cluster":  # the driver runs here: map this machine's archive, if any
            conf = with_driver_options(conf, cds.driver_options())
        self.conf = {**conf, **(self.conf or {})}
        binary = self._spark_binary or "spark-submit"
        if shutil.which(binary) is None and (Path(sys.executable).parent / binary).is_file():
            # `airflow` started from a venv that is not activated: spark-submit sits beside the interpreter.
            path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
            self.env_vars = {**(self.env_vars or {}), "PATH": path}
            self.log.info("%s is not on PATH; using %s", binary, Path(sys.executable).parent / binary)
        ti = context["ti"]
        label = f"airflow {ti.dag_id}/{ti.run_id}/{ti.task_id}"
        if self._deploy_mode != "cluster":
            self.env_vars = {**(self.env_vars or {}), LOCK_LABEL_ENV: label, **self._connection_env()}
        if not self.summary_json:
            return None
        path = run_file(run_dir(), ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        self.application_args = [*(self.application_args or []), "--summary-json", str(path)]
        return path

    def _connection_env(self) -> dict[str, str]:
        env = {}
        for conn_id in self.connections:
            try:
                conn = BaseHook.get_connection(conn_id)
            except AirflowNotFoundException:
                self.log.info("connection %s does not exist: the job uses its default (the local stack's)", conn_id)
                continue
            env[f"AIRFLOW_CONN_{conn_id.upper()}"] = conn.get_uri()
            self.log.info("connection %s handed to the job", conn_id)
        return env

    def execute(self, context: Any) -> dict[str, Any] | None:
        summary_path = self._prepare(context)
        super().execute(context)
        if summary_path is None:
            return None
        if not summary_path.is_file():
            raise FileNotFoundError(f"spark job {self.job} finished without writing its summary {summary_path}")
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        self.log.info("Job %s summary (%s): %s", self.job, summary_path, json.dumps(summary)[:2000])
        return {"summary_path": str(summary_path), "summary": summary}
