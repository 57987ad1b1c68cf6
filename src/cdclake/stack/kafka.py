"""Apache Kafka broker in KRaft combined mode (broker + controller in one process, one node)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence

from cdclake.exceptions import StackError
from cdclake.stack.base import Endpoint, JvmService, Service

LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
"""


def jvm_command(service: Service, main_class: str, heap: str, *args: str, jvm_options: Sequence[str] = ()) -> list[str]:
    """``java`` command line for a Kafka/Connect main class on the resolved Kafka classpath."""
    classpath = str(service.config.jvm_dir / "kafka" / "*")
    return [
        str(service.bins.java),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=50",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={service.config.state_dir / 'log4j2.properties'}",
        f"-Dcdclake.stack={service.config.state_dir}",
        *jvm_options,
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (22 characters).

    Like Kafka's own ``Uuid.randomUuid``, never one that starts with ``-`` (one id in 64 would), which
    command-line parsers take for an option.
    """
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaService(JvmService):
    name = "kafka"

    @property
    def properties_file(self):  # type: ignore[no-untyped-def]
        return self.home / "server.properties"

    def endpoints(self) -> list[Endpoint]:
        return [
            Endpoint("broker", self.config.kafka_port, "CDC_KAFKA_PORT"),
            Endpoint("controller", self.config.kafka_controller_port, "CDC_KAFKA_CONTROLLER_PORT"),
        ]

    def server_properties(self) -> str:
        c = self.config
        return "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@{c.host}:{c.kafka_controller_port}",
                f"listeners=PLAINTEXT://{c.host}:{c.kafka_port},CONTROLLER://{c.host}:{c.kafka_controller_port}",
                f"advertised.listeners=PLAINTEXT://{c.host}:{c.kafka_port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                f"log.dirs={self.home / 'data'}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.retention.hours=-1",
                "log.segment.bytes=67108864",
                "num.network.threads=2",
                "num.io.threads=2",
                "background.threads=2",
                "",
            ]
        )

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.config.state_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        self.properties_file.write_text(self.server_properties())
        if (self.home / "data" / "meta.properties").exists():
            return
        cluster_id_file = self.home / "cluster.id"
        if not cluster_id_file.exists():
            cluster_id_file.write_text(new_cluster_id())
        cmd = jvm_command(
            self,
            "kafka.tools.StorageTool",
            "256m",
            "format",
            # one argument: an id that starts with "-" would otherwise be read as an option
            f"--cluster-id={cluster_id_file.read_text().strip()}",
            "-c",
            str(self.properties_file),
            "--ignore-formatted",
        )
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise StackError(f"kafka: formatting KRaft storage failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        self.process.start(jvm_command(self, "kafka.Kafka", self.config.kafka_heap, str(self.properties_file)))

    def ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.config.kafka_bootstrap, "socket.timeout.ms": 3000, "log_level": 0}
        )
        metadata = admin.list_topics(timeout=3)
        return bool(metadata.brokers)

    def describe(self) -> str:
        return f"Kafka (KRaft) broker {self.config.kafka_bootstrap}, controller {self.config.host}:{self.config.kafka_controller_port}"
