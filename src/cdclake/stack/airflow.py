"""Airflow 3 in the local stack: API server, scheduler (LocalExecutor), DAG processor and triggerer.

Each component is a service of its own (pid file, log, ``stack status``, ``stack logs airflow-scheduler``),
run from ``airflow`` of this Python environment with ``AIRFLOW_HOME=<state>/airflow``:

* the metadata database is ``airflow`` in the stack's PostgreSQL, owned by the role ``airflow``
  (:mod:`cdclake.stack.postgres`), migrated by ``airflow db migrate`` when Airflow or the database changed;
* ``airflow.cfg`` (mode 0600, it holds the database password, the Fernet key and the JWT secret) loads the
  project's ``dags/`` and ``plugins/``, no examples, and pauses every DAG when it first appears;
* the simple auth manager knows one user, ``admin``, whose password is ``AIRFLOW_ADMIN_PASSWORD`` of
  ``secrets.env``;
* the stack's connections (:func:`stack_connections`) are stored in the metadata database through the REST
  API once the API server answers, so they show under Admin -> Connections, their passwords encrypted.

The components' environment names the deployment's sources (``CDC_SOURCES``: the specs whose databases the
stack runs), the ingest schedule (``CDC_INGEST_INTERVAL``) and the lake (``CDC_LAKE_*``): the embedded lake, or on
the cluster profile its REST catalog and S3 warehouse, whose key pair is the only secret in it (its file,
``environment.json``, leaves the key pair out). The ``spark_default`` connection is the Spark jobs' master:
``local[*]``, or the cluster profile's standalone master; pointing it elsewhere is all it takes to move them.
"""

from __future__ import annotations

import configparser
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from cdclake.exceptions import NotInstalledError, StackError
from cdclake.lake import LakeConfig
from cdclake.paths import lake_dir, project_home
from cdclake.settings import Settings, interval_text, settings
from cdclake.stack.base import Endpoint, Service
from cdclake.stack.cluster import lake_environment
from cdclake.stack.config import DEMO_DATABASE, StackConfig, connect_auth, password, write_private

logger = logging.getLogger(__name__)

#: Service name -> ``airflow`` sub-command, in start order.
COMPONENTS = {
    "airflow-api-server": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
}
#: The connector specs whose databases the stack runs: the stack's Airflow generates and schedules only these.
STACK_SOURCES = ("postgres", "mariadb")
ADMIN_USER = "admin"
#: The ingest DAGs' schedule in the local stack (``CDC_INGEST_INTERVAL`` at ``stack up`` changes it).
STACK_INGEST_INTERVAL = "1m"
#: Task slots of the LocalExecutor: every Spark job is a driver JVM of its own, and the machine has 2 cores.
PARALLELISM = 4
#: The pool of the Spark job tasks; its slots are ``CDC_SPARK_SLOTS`` at ``stack up`` (default 1: Spark drivers side
#: by side on two cores each take several times longer than one after the other).
SPARK_POOL = "cdc_spark"
#: The key of each component in ``GET /api/v2/monitor/health``.
_HEALTH_KEYS = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}


def airflow_executable() -> Path:
    """``airflow`` of this Python environment (beside the interpreter), else the one on PATH.

    Raises:
        NotInstalledError: when Airflow is not installed.
    """
    beside = Path(sys.executable).parent / "airflow"
    if beside.is_file():
        return beside
    found = shutil.which("airflow")
    if found:
        return Path(found)
    raise NotInstalledError("the `airflow` command is not installed in this environment; run `make install`")


def stack_connections(config: StackConfig, secrets: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The stack's Airflow connections (id -> REST API fields; ``extra`` is a JSON string).

    ``cdc_<source>`` is the source's signal writer (``INSERT`` on the signal table only), ``cdc_<source>_reader``
    its reader (``SELECT`` on the captured tables: row counts and source-vs-lake reconciliation);
    ``kafka_connect_default`` carries the REST API's basic-auth credentials.
    """
    c = config
    connect_user, connect_password = connect_auth(dict(secrets))

    def database(conn_type: str, port: int, db: str, key: str) -> dict[str, Any]:
        user = {"signal": "cdc_signal", "reader": "cdc_reader"}[key]
        return {
            "conn_type": conn_type,
            "host": c.host,
            "port": port,
            "login": user,
            "password": password(dict(secrets), db, key),
            "schema": DEMO_DATABASE,
            "description": f"local stack {db}: {'signal writer' if key == 'signal' else 'reader'} ({user})",
        }

    return {
        "kafka_connect_default": {
            "conn_type": "kafka_connect",
            "host": c.host,
            "port": c.connect_port,
            "schema": "http",
            "login": connect_user,
            "password": connect_password,
            "extra": json.dumps({"timeout": [5, 30], "retries": 3}),
            "description": "local stack Kafka Connect (Debezium plugins)",
        },
        "kafka_default": {
            "conn_type": "kafka",
            "extra": json.dumps({"bootstrap.servers": c.kafka_bootstrap, "group.id": "cdclake-airflow"}),
            "description": "local stack Kafka broker (KRaft)",
        },
        "spark_default": {
            "conn_type": "spark",
            "host": c.spark_master_url if c.cluster else "local[*]",
            "extra": json.dumps({"deploy-mode": "client"}),
            "description": "Spark master of the ingestion and maintenance jobs",
        },
        "cdc_postgres": database("postgres", c.postgres_port, "postgres", "signal"),
        "cdc_postgres_reader": database("postgres", c.postgres_port, "postgres", "reader"),
        "cdc_mariadb": database("mysql", c.mariadb_port, "mariadb", "signal"),
        "cdc_mariadb_reader": database("mysql", c.mariadb_port, "mariadb", "reader"),
    }


#: The lake variables that hold the cluster profile's S3 key pair: in the components' environment, not in its file.
LAKE_SECRET_VARIABLES = ("CDC_LAKE_S3_ACCESS_KEY_ID", "CDC_LAKE_S3_SECRET_ACCESS_KEY")
#: The lake variables whose change (the other profile's lake) makes ``stack up`` restart the components.
LAKE_IDENTITY_VARIABLES = ("CDC_LAKE_KIND", "CDC_LAKE_URI")


class AirflowHome:
    """The stack's Airflow home (``<state>/airflow``): configuration, metadata database, environment.

    Args:
        config: the stack's settings.
        secrets: the stack's secrets (:func:`cdclake.stack.config.load_or_create_secrets`).
    """

    def __init__(self, config: StackConfig, secrets: Mapping[str, str]) -> None:
        self.config = config
        self.secrets = secrets

    @property
    def path(self) -> Path:
        return self.config.state_dir / "airflow"

    @property
    def config_file(self) -> Path:
        return self.path / "airflow.cfg"

    @property
    def passwords_file(self) -> Path:
        return self.path / "passwords.json"

    @property
    def environment_file(self) -> Path:
        """The environment the components were started with (no secret in it)."""
        return self.path / "environment.json"

    @property
    def url(self) -> str:
        return self.config.airflow_url

    def database_url(self) -> str:
        c = self.config
        secret = self.secrets["AIRFLOW_DB_PASSWORD"]
        return f"postgresql+psycopg://airflow:{secret}@{c.host}:{c.postgres_port}/airflow"

    def render_config(self) -> str:
        """``airflow.cfg`` (pure)."""
        c = self.config
        home = project_home()
        sections: dict[str, dict[str, str]] = {
            "core": {
                "dags_folder": str(home / "dags"),
                "plugins_folder": str(home / "plugins"),
                "executor": "LocalExecutor",
                "parallelism": str(PARALLELISM),
                "load_examples": "False",
                "dags_are_paused_at_creation": "True",
                "default_timezone": "utc",
                "fernet_key": self.secrets["AIRFLOW_FERNET_KEY"],
                "execution_api_server_url": f"{self.url}/execution/",
                "simple_auth_manager_users": f"{ADMIN_USER}:admin",
                "simple_auth_manager_passwords_file": str(self.passwords_file),
            },
            "database": {
                "sql_alchemy_conn": self.database_url(),
                # psycopg 3 serves the async engine too (Airflow's default would be asyncpg)
                "sql_alchemy_conn_async": self.database_url(),
                "sql_alchemy_pool_size": "3",
                "sql_alchemy_max_overflow": "5",
            },
            "api": {
                "host": c.host,
                "port": str(c.airflow_port),
                "workers": "1",
                "base_url": self.url,
                "secret_key": self.secrets["AIRFLOW_API_SECRET_KEY"],
                "expose_config": "False",
            },
            "api_auth": {"jwt_secret": self.secrets["AIRFLOW_JWT_SECRET"]},
            "logging": {
                "base_log_folder": str(self.path / "logs"),
                "dag_processor_child_process_log_directory": str(self.path / "logs" / "dag_processor"),
            },
        }
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_dict(sections)
        out = io.StringIO()
        out.write("# generated by `cdclake stack up` (holds secrets: mode 0600); regenerated at every start\n")
        parser.write(out)
        return out.getvalue()

    def environment(self) -> dict[str, str]:
        """What every component runs with: where Airflow and cdclake find their files, the sources, the lake.

        The ingest schedule is this process's ``CDC_INGEST_INTERVAL`` when set, else :data:`STACK_INGEST_INTERVAL`.
        """
        configured = settings()
        interval = interval_text(configured.ingest_interval) if "ingest_interval" in configured.explicit else None
        env = {
            "AIRFLOW_HOME": str(self.path),
            "AIRFLOW_CONFIG": str(self.config_file),
            "CDC_HOME": str(project_home(configured)),
            "CDC_STACK_DIR": str(self.config.state_dir),
            "CDC_SOURCES": ",".join(STACK_SOURCES),
            "CDC_INGEST_INTERVAL": interval or STACK_INGEST_INTERVAL,
            "CDC_SPARK_POOL": SPARK_POOL,
            "CDC_RUN_DIR": str(self.path / "runs"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        if self.config.cluster:
            # the master is the spark_default connection's, so that changing it is enough to move the jobs
            lake = {k: v for k, v in lake_environment(self.config, self.secrets).items() if k != "CDC_SPARK_MASTER"}
            env.update(lake)
        elif configured.lake_kind == "embedded":
            env["CDC_LAKE_DIR"] = str(lake_dir(configured))
        return env

    def lake_changed(self) -> bool:
        """Whether the running components were started for another lake (the other profile's) than they would be
        now."""
        started, now = self.started_environment(), self.environment()
        return bool(started) and any(started.get(k) != now.get(k) for k in LAKE_IDENTITY_VARIABLES)

    def started_environment(self) -> dict[str, str]:
        """The environment the running components were started with (empty before the first start)."""
        try:
            return dict(json.loads(self.environment_file.read_text()))
        except (FileNotFoundError, ValueError):
            return {}

    def client_environment(self, *, connections: bool = False) -> dict[str, str]:
        """What points the ``airflow`` command (and cdclake) at this Airflow: the components' environment without
        ``PATH`` (what ``cdclake stack env`` prints); ``connections`` adds the stack's connections as
        ``AIRFLOW_CONN_*`` (they hold the signal and reader passwords)."""
        started = self.started_environment() or self.environment()
        out = {key: value for key, value in started.items() if key != "PATH"}
        if self.config.cluster and out.get("CDC_LAKE_URI") == self.config.iceberg_rest_url:
            lake = lake_environment(self.config, self.secrets)
            out.update({key: lake[key] for key in LAKE_SECRET_VARIABLES})
        if connections:
            for conn_id, fields in stack_connections(self.config, self.secrets).items():
                conn = {k: v for k, v in fields.items() if k != "description"}
                if "extra" in conn:
                    conn["extra"] = json.loads(conn["extra"])
                out[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(conn)
        return out

    def lake(self) -> LakeConfig:
        """The lake the components write (the one they were started with; before a start, the environment's)."""
        env = self.client_environment()
        if env.get("CDC_LAKE_DIR"):
            return LakeConfig.embedded(env["CDC_LAKE_DIR"])
        if env.get("CDC_LAKE_KIND") == "rest":
            return LakeConfig.from_settings(Settings.from_env(env))
        return LakeConfig.from_env()

    def prepare(self) -> None:
        """Write ``airflow.cfg``, the admin's password file and the environment file (idempotent)."""
        for folder in (self.path, self.path / "logs", self.path / "runs"):
            folder.mkdir(parents=True, exist_ok=True)
        write_private(self.config_file, self.render_config())
        write_private(self.passwords_file, json.dumps({ADMIN_USER: self.secrets["AIRFLOW_ADMIN_PASSWORD"]}))
        env = {k: v for k, v in self.environment().items() if k != "PATH" and k not in LAKE_SECRET_VARIABLES}
        self.environment_file.write_text(json.dumps(env, indent=2) + "\n")

    def run(self, *args: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run one ``airflow`` command with the stack's configuration.

        Raises:
            StackError: when it fails (with its output's tail).
        """
        env = {**os.environ, **self.environment()}
        try:
            result = subprocess.run(
                [str(airflow_executable()), *args], env=env, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"airflow {' '.join(args)} did not finish in {timeout_s:.0f}s") from exc
        if result.returncode != 0:
            raise StackError(f"airflow {' '.join(args)} failed:\n{(result.stdout + result.stderr)[-3000:]}")
        return result

    def migrate(self) -> bool:
        """``airflow db migrate`` unless the database is already migrated for this Airflow; True when it ran."""
        stamp_file = self.path / ".migrated"
        version = metadata.version("apache-airflow-core")
        if stamp_file.exists() and stamp_file.read_text().strip() == version and self._has_tables():
            return False
        self.run("db", "migrate")
        stamp_file.write_text(version + "\n")
        return True

    def _has_tables(self) -> bool:
        import psycopg

        c = self.config
        try:
            with psycopg.connect(
                host=c.host,
                port=c.postgres_port,
                user="airflow",
                password=self.secrets["AIRFLOW_DB_PASSWORD"],
                dbname="airflow",
                connect_timeout=5,
            ) as conn:
                return conn.execute("SELECT to_regclass('public.alembic_version') IS NOT NULL").fetchone() == (True,)
        except psycopg.Error:
            return False

    def client(self) -> Any:
        """An :class:`~cdclake.orchestration.rest.AirflowRestClient` as ``admin``."""
        from cdclake.orchestration.rest import AirflowRestClient

        return AirflowRestClient(self.url, ADMIN_USER, self.secrets["AIRFLOW_ADMIN_PASSWORD"])

    def health(self) -> dict[str, Any]:
        """``GET /api/v2/monitor/health`` of the API server (short timeouts, no retry)."""
        import requests

        response = requests.get(f"{self.url}/api/v2/monitor/health", timeout=(2, 5))
        response.raise_for_status()
        return dict(response.json())


def spark_slots() -> int:
    """The slots of the Spark jobs' pool: ``CDC_SPARK_SLOTS`` (default 1).

    Raises:
        ConfigError: when it is not a positive number.
    """
    return settings().spark_slots


class AirflowService(Service):
    """One Airflow component, run as ``airflow <component>`` in its own working directory.

    Airflow's processes rewrite their command line and environment (``setproctitle``); the working directory,
    which every process it starts inherits, is how ``stack down`` finds all of them, task processes included.
    """

    component = ""

    def __init__(self, config: StackConfig, bins: Any, secrets: dict[str, str]) -> None:
        self.airflow = AirflowHome(config, secrets)
        super().__init__(config, bins, secrets)

    @property
    def workdir(self) -> Path:
        return self.airflow.path / "run" / self.name

    @property
    def marker(self) -> str:
        return f"airflow {self.component}"

    def endpoints(self) -> list[Endpoint]:
        return []

    def arguments(self) -> list[str]:
        return [self.component]

    def prepare(self) -> None:
        self.airflow.prepare()
        if self.airflow.migrate():
            logger.info("Airflow metadata database migrated")

    def start(self) -> None:
        self.process.start([str(airflow_executable()), *self.arguments()], env=self.airflow.environment())

    def ready(self) -> bool:
        component = self.airflow.health().get(_HEALTH_KEYS[self.component], {})
        if component.get("status") != "healthy":
            return False
        # a heartbeat from before this process started is an earlier instance's
        started = self.process.started_at()
        beat = component.get(f"latest_{_HEALTH_KEYS[self.component]}_heartbeat")
        return started is None or (beat is not None and _epoch(beat) >= started - 1.0)

    def describe(self) -> str:
        return f"Airflow {self.component} (LocalExecutor, {PARALLELISM} task slots)"


class AirflowApiServerService(AirflowService):
    """The API server: UI, public REST API (``/api/v2``) and the execution API the task processes call."""

    name = "airflow-api-server"
    component = "api-server"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("UI and API", self.config.airflow_port, "CDC_AIRFLOW_PORT")]

    def arguments(self) -> list[str]:
        c = self.config
        return [self.component, "--host", c.host, "--port", str(c.airflow_port), "--workers", "1"]

    def ready(self) -> bool:
        return self.airflow.health().get("metadatabase", {}).get("status") == "healthy"

    def bootstrap(self) -> None:
        """Store the stack's connections in the metadata database (encrypted with the Fernet key), and create
        the Spark jobs' pool (:data:`SPARK_POOL`, ``CDC_SPARK_SLOTS`` slots).

        Raises:
            ConfigError: when ``CDC_SPARK_SLOTS`` is not a positive number.
        """
        client = self.airflow.client()
        for conn_id, fields in stack_connections(self.config, self.secrets).items():
            client.upsert_connection(conn_id, fields)
        client.upsert_pool(SPARK_POOL, spark_slots(), "Spark jobs of cdclake (ingest, maintenance): one driver each")

    def describe(self) -> str:
        return (
            f"Airflow UI and API {self.airflow.url} (user {ADMIN_USER}, password AIRFLOW_ADMIN_PASSWORD in "
            f"{self.config.secrets_file})"
        )


class AirflowSchedulerService(AirflowService):
    name = "airflow-scheduler"
    component = "scheduler"

    def arguments(self) -> list[str]:
        # task logs are files under AIRFLOW_HOME/logs, read by the API server: no log-serving process
        return [self.component, "--skip-serve-logs"]


class AirflowDagProcessorService(AirflowService):
    name = "airflow-dag-processor"
    component = "dag-processor"

    def describe(self) -> str:
        return f"Airflow DAG processor ({project_home() / 'dags'})"


class AirflowTriggererService(AirflowService):
    name = "airflow-triggerer"
    component = "triggerer"

    def arguments(self) -> list[str]:
        return [self.component, "--skip-serve-logs"]

    def describe(self) -> str:
        return "Airflow triggerer (deferrable sensors)"


AIRFLOW_SERVICES: tuple[type[AirflowService], ...] = (
    AirflowApiServerService,
    AirflowSchedulerService,
    AirflowDagProcessorService,
    AirflowTriggererService,
)


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def wait_for_airflow(home: AirflowHome, timeout_s: float = 120.0) -> None:
    """Wait until the API server answers healthy.

    Raises:
        StackError: when it does not within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if home.health().get("metadatabase", {}).get("status") == "healthy":
                return
        except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
            last = exc
        time.sleep(1.0)
    raise StackError(f"Airflow at {home.url} is not healthy after {timeout_s:.0f}s: {last}")
