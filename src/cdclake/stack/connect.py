"""Kafka Connect distributed worker with the Debezium connector plugins."""

from __future__ import annotations

import requests

from cdclake.stack.base import Endpoint, Service
from cdclake.stack.config import capture_secrets
from cdclake.stack.kafka import jvm_command

#: Connector classes the worker must list in ``GET /connector-plugins`` before it counts as ready.
DEBEZIUM_CONNECTOR_CLASSES = (
    "io.debezium.connector.postgresql.PostgresConnector",
    "io.debezium.connector.mysql.MySqlConnector",
    "io.debezium.connector.mariadb.MariaDbConnector",
    "io.debezium.connector.mongodb.MongoDbConnector",
    "io.debezium.connector.informix.InformixConnector",
)


class ConnectService(Service):
    name = "connect"

    @property
    def marker(self) -> str:
        return f"-Dcdclake.stack={self.config.state_dir}"

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("REST", self.config.connect_port, "CDC_CONNECT_PORT")]

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
                f"plugin.path={c.jvm_dir / 'connect-plugins'}",
                # Secrets reach connector configs through config providers, never inline:
                # ${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}, ${file:/path:key}, ${dir:/path:file}.
                "config.providers=env,file,dir",
                "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider",
                "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
                "config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider",
                "task.shutdown.graceful.timeout.ms=5000",
                "scheduled.rebalance.max.delay.ms=0",
                "",
            ]
        )

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "worker.properties").write_text(self.worker_properties())

    def start(self) -> None:
        cmd = jvm_command(
            self,
            "org.apache.kafka.connect.cli.ConnectDistributed",
            self.config.connect_heap,
            str(self.home / "worker.properties"),
        )
        # The env config provider resolves ${env:CDC_<DB>_DEBEZIUM_PASSWORD} from the worker's environment,
        # which holds the capture users' passwords and no other secret of the stack.
        self.process.start(cmd, env=capture_secrets(self.secrets))

    def plugin_classes(self) -> set[str]:
        response = requests.get(f"{self.config.connect_url}/connector-plugins", timeout=5)
        response.raise_for_status()
        return {plugin["class"] for plugin in response.json()}

    def ready(self) -> bool:
        return set(DEBEZIUM_CONNECTOR_CLASSES) <= self.plugin_classes()

    def describe(self) -> str:
        return f"Kafka Connect REST {self.config.connect_url} (plugins: {self.config.jvm_dir / 'connect-plugins'})"
