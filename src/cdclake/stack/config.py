"""Settings of the local stack: ports, directories, memory, and the generated credentials."""

from __future__ import annotations

import base64
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

from cdclake.paths import jvm_dir, stack_dir
from cdclake.settings import Settings, settings

#: The ports of the stack, each overridden by its ``CDC_*_PORT`` variable (:mod:`cdclake.settings`;
#: ``cdclake stack up --help`` lists the options).
PORTS = ("kafka_port", "kafka_controller_port", "connect_port", "postgres_port", "mariadb_port", "airflow_port")
#: The cluster profile's ports (``CDC_SPARK_MASTER_PORT`` etc.).
CLUSTER_PORTS = ("spark_master_port", "spark_ui_port", "iceberg_rest_port", "s3_port")
#: The cluster profile's other settings, read from :class:`~cdclake.settings.Settings` like the ports.
CLUSTER_SETTINGS = ("stack_profile", "spark_workers", "spark_worker_cores", "spark_worker_memory")

#: Database users the stack creates. ``debezium`` captures (least privilege), ``cdc_signal`` only
#: inserts signal rows, ``cdc_reader`` only reads the captured tables (source-vs-lake comparisons),
#: ``cdclake_app`` owns the demo tables (workloads, tests).
DB_USERS = ("admin", "debezium", "signal", "reader", "app")
#: Secrets of the stack's Airflow (names as in docker-compose's ``.env``): the admin user's password, the
#: PostgreSQL role ``airflow`` owning the metadata database, the Fernet key encrypting connection passwords in
#: it, the JWT secret its components share and the API server's session secret.
AIRFLOW_SECRETS = (
    "AIRFLOW_ADMIN_PASSWORD",
    "AIRFLOW_DB_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
)
#: The user of Kafka Connect's REST API (``BasicAuthSecurityRestExtension``); its password is
#: :data:`CONNECT_SECRET` in ``secrets.env``.
CONNECT_USER = "cdclake"
CONNECT_SECRET = "CDC_CONNECT_PASSWORD"
#: The cluster profile's secrets: the object store's access key pair, and the password of the PostgreSQL role
#: :data:`ICEBERG_ROLE` that owns the REST catalog's tables (database :data:`ICEBERG_DATABASE`).
S3_ACCESS_KEY = "CDC_S3_ACCESS_KEY_ID"
S3_SECRET_KEY = "CDC_S3_SECRET_ACCESS_KEY"
ICEBERG_DB_SECRET = "CDC_ICEBERG_DB_PASSWORD"
CLUSTER_SECRETS = (S3_ACCESS_KEY, S3_SECRET_KEY, ICEBERG_DB_SECRET)
ICEBERG_ROLE = "iceberg"
ICEBERG_DATABASE = "iceberg_catalog"
#: The object store's bucket holding the cluster profile's warehouse.
WAREHOUSE_BUCKET = "warehouse"
#: The region the S3 clients sign for; s3proxy accepts any.
S3_REGION = "us-east-1"
DEMO_DATABASE = "demo"
POSTGRES_SCHEMA = "inventory"
POSTGRES_PUBLICATION = "cdclake_pub"
SIGNAL_TABLE = "debezium_signal"
MARIADB_SERVER_ID = 184054


@dataclass(frozen=True)
class StackConfig:
    """Where and how the local stack runs. Build with :meth:`from_env`; override with :func:`dataclasses.replace`."""

    state_dir: Path
    jvm_dir: Path
    host: str = "127.0.0.1"
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    connect_port: int = 8083
    postgres_port: int = 5433
    mariadb_port: int = 3307
    airflow_port: int = 8080
    spark_master_port: int = 7077
    spark_ui_port: int = 8090
    iceberg_rest_port: int = 8181
    s3_port: int = 9000
    stack_profile: str = "default"
    spark_workers: int = 1
    spark_worker_cores: int = 2
    spark_worker_memory: str = "3g"
    kafka_heap: str = "512m"
    connect_heap: str = "768m"
    start_timeout_s: float = 120.0
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, state_dir: Path | None = None) -> StackConfig:
        """:meth:`from_settings` of this process's settings (:func:`cdclake.settings.settings`).

        Raises:
            ConfigError: naming the variable, when one does not parse (a port that is not a port number).
        """
        return cls.from_settings(settings(), state_dir)

    @classmethod
    def from_settings(cls, config: Settings, state_dir: Path | None = None) -> StackConfig:
        """Defaults, overridden by ``CDC_STACK_DIR``, ``CDC_JVM_DIR`` and the ``CDC_*_PORT`` settings."""
        return cls(
            state_dir=(state_dir or stack_dir(config)).resolve(),
            jvm_dir=jvm_dir(config),
            **{name: getattr(config, name) for name in (*PORTS, *CLUSTER_PORTS, *CLUSTER_SETTINGS)},
        )

    def with_ports(self, **ports: int | None) -> StackConfig:
        """Return a copy with the given (non-None) ports replaced."""
        return replace(self, **{k: v for k, v in ports.items() if v is not None})

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def connect_url(self) -> str:
        return f"http://{self.host}:{self.connect_port}"

    @property
    def secrets_file(self) -> Path:
        return self.state_dir / "secrets.env"

    @property
    def airflow_url(self) -> str:
        return f"http://{self.host}:{self.airflow_port}"

    @property
    def cluster(self) -> bool:
        """True for the cluster profile."""
        return self.stack_profile == "cluster"

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.host}:{self.spark_master_port}"

    @property
    def spark_ui_url(self) -> str:
        return f"http://{self.host}:{self.spark_ui_port}"

    @property
    def iceberg_rest_url(self) -> str:
        return f"http://{self.host}:{self.iceberg_rest_port}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.host}:{self.s3_port}"


def _secret_name(db: str, user: str) -> str:
    return f"CDC_{db.upper()}_{user.upper()}_PASSWORD"


def _new_secret(name: str) -> str:
    if name == "AIRFLOW_FERNET_KEY":  # what cryptography's Fernet.generate_key() returns
        return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    if name == S3_ACCESS_KEY:  # letters and digits, as S3 access key ids are
        return "CDC" + secrets.token_hex(8).upper()
    return secrets.token_urlsafe(32 if name.startswith("AIRFLOW_") else 18)


def secret_names() -> list[str]:
    """Every secret of the stack, in the order of ``secrets.env``."""
    databases = [_secret_name(db, user) for db in ("postgres", "mariadb") for user in DB_USERS]
    return [*databases, CONNECT_SECRET, *AIRFLOW_SECRETS, *CLUSTER_SECRETS]


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by its owner only (mode 0600, also when it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    path.chmod(0o600)


def load_or_create_secrets(config: StackConfig) -> dict[str, str]:
    """Return the stack's passwords and keys, generating the missing ones on first use.

    They live in ``<state>/secrets.env`` (mode 0600): ``CDC_<DB>_<USER>_PASSWORD=...`` lines for the
    database users, ``CDC_CONNECT_PASSWORD`` of Kafka Connect's REST API (:data:`CONNECT_USER`), and the Airflow
    secrets (:data:`AIRFLOW_SECRETS`). Kafka Connect's worker gets the capture users' passwords as environment
    variables (read through its ``env`` config provider), nothing else.
    """
    path = config.secrets_file
    values: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip()
    wanted = secret_names()
    missing = [name for name in wanted if name not in values]
    if missing:
        for name in missing:
            values[name] = _new_secret(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "# generated by `cdclake stack up`; local stack only\n" + "".join(f"{k}={values[k]}\n" for k in wanted)
        write_private(path, body)
    return {name: values[name] for name in wanted}


def capture_secrets(secrets_: dict[str, str]) -> dict[str, str]:
    """The passwords Kafka Connect's connectors reference (``${env:CDC_<DB>_DEBEZIUM_PASSWORD}``), nothing else."""
    return {name: value for name, value in secrets_.items() if name.endswith("_DEBEZIUM_PASSWORD")}


def connect_auth(secrets_: dict[str, str]) -> tuple[str, str]:
    """The ``(user, password)`` of Kafka Connect's REST API."""
    return CONNECT_USER, secrets_[CONNECT_SECRET]


def password(secrets_: dict[str, str], db: str, user: str) -> str:
    """The generated password of ``user`` (one of :data:`DB_USERS`) on ``db`` (postgres | mariadb)."""
    return secrets_[_secret_name(db, user)]
