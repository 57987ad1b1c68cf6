"""Kafka Connect distributed worker with the Debezium connector plugins.

Its REST API asks every request for basic authentication (``BasicAuthSecurityRestExtension``, user
:data:`~cdclake.stack.config.CONNECT_USER`, password ``CDC_CONNECT_PASSWORD`` of ``secrets.env``). The worker runs
with a minimal environment (:data:`WORKER_ENV`) plus the capture users' passwords, which its ``env`` config
provider may read and nothing else may; its ``file`` and ``dir`` providers may read only ``connect/secrets/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import requests

from cdclake.stack.base import Endpoint, JvmService
from cdclake.stack.config import capture_secrets, connect_auth, write_private
from cdclake.stack.kafka import jvm_command

#: Connector classes the worker must list in ``GET /connector-plugins`` before it counts as ready.
DEBEZIUM_CONNECTOR_CLASSES = (
    "io.debezium.connector.postgresql.PostgresConnector",
    "io.debezium.connector.mysql.MySqlConnector",
    "io.debezium.connector.mariadb.MariaDbConnector",
    "io.debezium.connector.mongodb.MongoDbConnector",
    "io.debezium.connector.informix.InformixConnector",
)
#: The REST extension that makes every request of the worker's REST API authenticate.
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
#: The JAAS login module the extension checks credentials with: a properties file of ``user=password``.
LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
#: What the ``env`` config provider may read: the capture users' passwords (``CDC_<DB>_DEBEZIUM_PASSWORD``).
ENV_ALLOWLIST = "^CDC_[A-Z0-9]+_DEBEZIUM_PASSWORD$"
#: The variables of the caller's environment the worker inherits; nothing else of it reaches the worker.
WORKER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME")


class ConnectService(JvmService):
    name = "connect"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("REST", self.config.connect_port, "CDC_CONNECT_PORT")]

    @property
    def secrets_dir(self) -> Path:
        """The one directory the ``file`` and ``dir`` config providers may read (``allowed.paths``)."""
        return self.home / "secrets"

    @property
    def credentials_file(self) -> Path:
        """The REST API's ``user=password`` file (mode 0600), read by :data:`LOGIN_MODULE`."""
        return self.home / "rest-credentials.properties"

    @property
    def jaas_file(self) -> Path:
        return self.home / "rest-jaas.conf"

    def worker_properties(self) -> str:
        c = self.config
        return "\n".join(
            [
                f"bootstrap.servers={c.kafka_bootstrap}",
                "group.id=cdclake-connect",
                "key.converter=org.apache.kafka.connect.json.JsonConverter",
                "value.converter=org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable=true",
                "value.converter.schemas.enable=true",
                "config.storage.topic=_cdclake-connect-configs",
                "config.storage.replication.factor=1",
                "offset.storage.topic=_cdclake-connect-offsets",
                "offset.storage.replication.factor=1",
                "offset.storage.partitions=1",
                "status.storage.topic=_cdclake-connect-status",
                "status.storage.replication.factor=1",
                "status.storage.partitions=1",
                "offset.flush.interval.ms=2000",
                f"listeners=http://{c.host}:{c.connect_port}",
                f"rest.advertised.host.name={c.host}",
                f"rest.advertised.port={c.connect_port}",
                f"rest.extension.classes={BASIC_AUTH_EXTENSION}",
                f"plugin.path={c.jvm_dir / 'connect-plugins'}",
                # Secrets reach connector configs through config providers, never inline:
                # ${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}, ${file:<secrets>/f:key}, ${dir:<secrets>:file}.
                "config.providers=env,file,dir",
                "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                f"config.providers.env.param.allowlist.pattern={ENV_ALLOWLIST}",
                "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
                f"config.providers.file.param.allowed.paths={self.secrets_dir}",
                "config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider",
                f"config.providers.dir.param.allowed.paths={self.secrets_dir}",
                "task.shutdown.graceful.timeout.ms=5000",
                "scheduled.rebalance.max.delay.ms=0",
                "",
            ]
        )

    def jaas_config(self) -> str:
        return f'KafkaConnect {{\n  {LOGIN_MODULE} required\n  file="{self.credentials_file}";\n}};\n'

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.secrets_dir.mkdir(mode=0o700, exist_ok=True)
        (self.home / "worker.properties").write_text(self.worker_properties())
        self.jaas_file.write_text(self.jaas_config())
        user, secret = connect_auth(self.secrets)
        write_private(self.credentials_file, f"{user}={secret}\n")

    def worker_environment(self) -> dict[str, str]:
        """The worker's whole environment: :data:`WORKER_ENV` of ours, and the capture users' passwords.

        The env config provider resolves ``${env:CDC_<DB>_DEBEZIUM_PASSWORD}`` from it; no other secret of the
        stack (superusers', readers', Airflow's) is in it.
        """
        return {**{k: os.environ[k] for k in WORKER_ENV if k in os.environ}, **capture_secrets(self.secrets)}

    def start(self) -> None:
        cmd = jvm_command(
            self,
            "org.apache.kafka.connect.cli.ConnectDistributed",
            self.config.connect_heap,
            str(self.home / "worker.properties"),
            jvm_options=(f"-Djava.security.auth.login.config={self.jaas_file}",),
        )
        self.process.start(cmd, env=self.worker_environment(), inherit_env=False)

    def plugin_classes(self) -> set[str]:
        url = f"{self.config.connect_url}/connector-plugins"
        response = requests.get(url, timeout=5, auth=connect_auth(self.secrets))
        response.raise_for_status()
        return {plugin["class"] for plugin in response.json()}

    def ready(self) -> bool:
        return set(DEBEZIUM_CONNECTOR_CLASSES) <= self.plugin_classes()

    def describe(self) -> str:
        return f"Kafka Connect REST {self.config.connect_url} (plugins: {self.config.jvm_dir / 'connect-plugins'})"
