"""The cluster profile's services (``cdclake stack up --profile cluster``): the lake on a real Iceberg REST catalog
over S3-compatible object storage, and Spark as a standalone cluster.

* ``s3proxy``: an S3-compatible server over ``<state>/s3proxy/data`` (one directory per bucket; the warehouse is
  bucket :data:`~cdclake.stack.config.WAREHOUSE_BUCKET`). It asks every request for AWS signatures with the key
  pair ``CDC_S3_ACCESS_KEY_ID`` / ``CDC_S3_SECRET_ACCESS_KEY`` of ``secrets.env``.
* ``iceberg-rest``: Iceberg's REST catalog server (``RESTCatalogServer``, what the ``apache/iceberg-rest-fixture``
  image runs, started by ``jvm/cluster``'s launcher so that it listens on loopback only and accepts the REST
  specification's separator of nested namespaces, ``%1F``, which DuckDB sends) over a JDBC catalog in the stack's PostgreSQL (database ``iceberg_catalog``, role ``iceberg``),
  writing table metadata to the warehouse with ``S3FileIO``. Its credentials reach it through the environment
  (AWS's variables, a ``.pgpass`` file), never as catalog properties, which it logs.
* ``spark-master`` and ``spark-worker-<n>``: Spark's standalone master and ``CDC_SPARK_WORKERS`` workers, from the
  Spark that pyspark installs. Each worker offers ``CDC_SPARK_WORKER_CORES`` cores and
  ``CDC_SPARK_WORKER_MEMORY`` to executors, which it launches as processes of their own.

Their jars come from ``jvm/cluster/pom.xml`` (``make cluster-jars``, into ``<CDC_JVM_DIR>/cluster``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import requests

from cdclake.stack.base import Endpoint, JvmService, Service, http_answers
from cdclake.stack.config import (
    ICEBERG_DATABASE,
    ICEBERG_DB_SECRET,
    ICEBERG_ROLE,
    S3_ACCESS_KEY,
    S3_REGION,
    S3_SECRET_KEY,
    WAREHOUSE_BUCKET,
    StackConfig,
    write_private,
)
from cdclake.stack.debian import Binaries

#: The variables of the caller's environment a cluster service inherits; nothing else of it reaches the service.
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME")


def lake_environment(config: StackConfig, secrets: dict[str, str]) -> dict[str, str]:
    """The ``CDC_*`` variables that point cdclake (the CLI, jobs, Airflow's tasks) at the cluster profile: the REST
    catalog, its S3 warehouse, and the Spark master."""
    return {
        "CDC_LAKE_KIND": "rest",
        "CDC_LAKE_URI": config.iceberg_rest_url,
        "CDC_LAKE_WAREHOUSE": f"s3://{WAREHOUSE_BUCKET}/",
        "CDC_LAKE_S3_ENDPOINT": config.s3_endpoint,
        "CDC_LAKE_S3_ACCESS_KEY_ID": secrets[S3_ACCESS_KEY],
        "CDC_LAKE_S3_SECRET_ACCESS_KEY": secrets[S3_SECRET_KEY],
        "CDC_LAKE_S3_REGION": S3_REGION,
        "CDC_SPARK_MASTER": config.spark_master_url,
    }


def _environment(**extra: str) -> dict[str, str]:
    return {**{k: os.environ[k] for k in BASE_ENV if k in os.environ}, **extra}


def _java(service: Service, heap: str, *args: str) -> list[str]:
    return [
        str(service.bins.java),
        f"-Xmx{heap}",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        service.marker,
        *args,
    ]


def cluster_jars(config: StackConfig, component: str) -> Path:
    """The directory of one cluster server's jars (``s3proxy``, ``iceberg-rest``).

    Raises:
        NotInstalledError: ``make cluster-jars`` has not run.
    """
    from cdclake.exceptions import NotInstalledError

    folder = config.jvm_dir / "cluster" / component
    if not any(folder.glob("*.jar")):
        raise NotInstalledError(f"no jars in {folder}; run `make cluster-jars` (the cluster profile's servers)")
    return folder


class S3ProxyService(JvmService):
    name = "s3proxy"

    @property
    def data_dir(self) -> Path:
        """The object store's root: one directory per bucket."""
        return self.home / "data"

    @property
    def properties_file(self) -> Path:
        return self.home / "s3proxy.properties"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("S3 API", self.config.s3_port, "CDC_S3_PORT")]

    def properties(self) -> str:
        return "\n".join(
            [
                f"s3proxy.endpoint={self.config.s3_endpoint}",
                "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={self.secrets[S3_ACCESS_KEY]}",
                f"s3proxy.credential={self.secrets[S3_SECRET_KEY]}",
                "jclouds.provider=filesystem",
                f"jclouds.filesystem.basedir={self.data_dir}",
                "",
            ]
        )

    def prepare(self) -> None:
        (self.data_dir / WAREHOUSE_BUCKET).mkdir(parents=True, exist_ok=True)
        write_private(self.properties_file, self.properties())

    def start(self) -> None:
        jar = next(cluster_jars(self.config, "s3proxy").glob("s3proxy-*.jar"))
        cmd = _java(self, "256m", "-jar", str(jar), "--properties", str(self.properties_file))
        self.process.start(cmd, env=_environment(), inherit_env=False)

    def ready(self) -> bool:
        # an unsigned request is refused (403): enough to know the server answers S3 requests
        return http_answers(self.config.s3_endpoint, expected=(200, 403))

    def describe(self) -> str:
        return f"S3 (s3proxy) {self.config.s3_endpoint}, bucket {WAREHOUSE_BUCKET} in {self.data_dir}"


class IcebergRestService(JvmService):
    name = "iceberg-rest"

    @property
    def pgpass_file(self) -> Path:
        return self.home / "pgpass"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("REST", self.config.iceberg_rest_port, "CDC_ICEBERG_REST_PORT")]

    def server_environment(self) -> dict[str, str]:
        """The server's whole environment: its catalog's properties as ``CATALOG_*`` variables (``_`` for ``.``,
        ``__`` for ``-``), and the credentials where its clients look for them."""
        c = self.config
        return _environment(
            CATALOG_CATALOG_NAME="lake",
            CATALOG_REST_PORT=str(c.iceberg_rest_port),
            CATALOG_URI=f"jdbc:postgresql://{c.host}:{c.postgres_port}/{ICEBERG_DATABASE}",
            CATALOG_JDBC_USER=ICEBERG_ROLE,
            CATALOG_JDBC_SCHEMA__VERSION="V1",
            CATALOG_WAREHOUSE=f"s3://{WAREHOUSE_BUCKET}/",
            CATALOG_IO__IMPL="org.apache.iceberg.aws.s3.S3FileIO",
            CATALOG_S3_ENDPOINT=c.s3_endpoint,
            CATALOG_S3_PATH__STYLE__ACCESS="true",
            CATALOG_CLIENT_REGION=S3_REGION,
            PGPASSFILE=str(self.pgpass_file),
            AWS_ACCESS_KEY_ID=self.secrets[S3_ACCESS_KEY],
            AWS_SECRET_ACCESS_KEY=self.secrets[S3_SECRET_KEY],
        )

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        c = self.config
        write_private(
            self.pgpass_file,
            f"{c.host}:{c.postgres_port}:{ICEBERG_DATABASE}:{ICEBERG_ROLE}:{self.secrets[ICEBERG_DB_SECRET]}\n",
        )

    def start(self) -> None:
        classpath = str(cluster_jars(self.config, "iceberg-rest") / "*")
        cmd = _java(
            self,
            "384m",
            f"-Dcdclake.rest.host={self.config.host}",
            "-cp",
            classpath,
            "dev.cdclake.rest.RestCatalogLauncher",
        )
        self.process.start(cmd, env=self.server_environment(), inherit_env=False, cwd=self.home)

    def ready(self) -> bool:
        return http_answers(f"{self.config.iceberg_rest_url}/v1/config")

    def describe(self) -> str:
        return (
            f"Iceberg REST catalog {self.config.iceberg_rest_url} (JDBC catalog in PostgreSQL database "
            f"{ICEBERG_DATABASE}, warehouse s3://{WAREHOUSE_BUCKET}/)"
        )


def spark_home() -> Path:
    """The Spark that pyspark installs (its ``jars/`` are the cluster's classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_environment(host: str) -> dict[str, str]:
    """The environment of the master and the workers (and so of the executors the workers launch).

    pyspark's Spark is not a release build (no ``RELEASE`` file), so Spark's launcher needs
    ``SPARK_SCALA_VERSION``, read here from the name of its ``spark-core_<scala>`` jar.
    """
    home = spark_home()
    core = next((home / "jars").glob("spark-core_*.jar"))
    scala = core.name.removeprefix("spark-core_").split("-", 1)[0]
    return _environment(SPARK_HOME=str(home), SPARK_LOCAL_IP=host, SPARK_SCALA_VERSION=scala)


def master_state(config: StackConfig) -> dict[str, Any]:
    """The Spark master's state as its web UI serves it (``/json/``): its status, workers and applications."""
    response = requests.get(f"{config.spark_ui_url}/json/", timeout=3)
    response.raise_for_status()
    return dict(response.json())


class SparkMasterService(JvmService):
    name = "spark-master"

    def endpoints(self) -> list[Endpoint]:
        return [
            Endpoint("master", self.config.spark_master_port, "CDC_SPARK_MASTER_PORT"),
            Endpoint("web UI", self.config.spark_ui_port, "CDC_SPARK_UI_PORT"),
        ]

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        c = self.config
        home = spark_home()
        cmd = _java(
            self,
            "512m",
            # no REST submission server (port 6066, unauthenticated): applications connect as clients
            "-Dspark.master.rest.enabled=false",
            "-cp",
            str(home / "jars" / "*"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            c.host,
            "--port",
            str(c.spark_master_port),
            "--webui-port",
            str(c.spark_ui_port),
        )
        self.process.start(cmd, env=spark_environment(c.host), inherit_env=False)

    def ready(self) -> bool:
        return master_state(self.config).get("status") == "ALIVE"

    def describe(self) -> str:
        return f"Spark master {self.config.spark_master_url}, web UI {self.config.spark_ui_url}"


class SparkWorkerService(JvmService):
    """Worker ``index`` (1, 2, ...) of the cluster profile."""

    def __init__(self, config: StackConfig, bins: Binaries, secrets: dict[str, str], index: int = 1) -> None:
        self.index = index
        self.name = f"spark-worker-{index}"
        super().__init__(config, bins, secrets)

    @property
    def marker(self) -> str:
        return f"-Dcdclake.stack={self.config.state_dir}/{self.name}"

    @property
    def ui_port(self) -> int:
        return self.config.spark_ui_port + self.index

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint(f"worker {self.index} web UI", self.ui_port, "CDC_SPARK_UI_PORT")]

    def prepare(self) -> None:
        (self.home / "work").mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        c = self.config
        home = spark_home()
        cmd = _java(
            self,
            "256m",
            "-cp",
            str(home / "jars" / "*"),
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            c.host,
            "--cores",
            str(c.spark_worker_cores),
            "--memory",
            c.spark_worker_memory,
            "--webui-port",
            str(self.ui_port),
            "--work-dir",
            str(self.home / "work"),
            c.spark_master_url,
        )
        self.process.start(cmd, env=spark_environment(c.host), inherit_env=False)

    def ready(self) -> bool:
        """Registered with the master and alive there."""
        return any(
            worker.get("state") == "ALIVE" and str(worker.get("webuiaddress", "")).endswith(f":{self.ui_port}")
            for worker in master_state(self.config).get("workers", [])
        )

    def describe(self) -> str:
        c = self.config
        return f"Spark worker {self.index}: {c.spark_worker_cores} cores, {c.spark_worker_memory}, web UI http://{c.host}:{self.ui_port}"
