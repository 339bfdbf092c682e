"""A real Kafka broker for the tests: one KRaft node (broker and controller) on
loopback, from the jars that ``make kafka-jars`` fetches from Maven Central."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.support import free_port, wait_for

#: Where ``make kafka-jars`` puts the broker's jars (tests/kafka/pom.xml).
JARS = Path(os.environ.get("DELAYLINE_KAFKA_JARS", Path(__file__).parents[2] / "build/kafka-jars"))


def server_properties(directory: Path, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={directory / 'logs'}",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            # A topic exists once created: a message to another one is refused.
            "auto.create.topics.enable=false",
            "",
        ]
    )


def java_command() -> list[str]:
    """Java, from JAVA_HOME if it is set."""
    if "JAVA_HOME" in os.environ:
        return [os.path.join(os.environ["JAVA_HOME"], "bin", "java")]
    return ["java"]


def kafka_tool(
    main_class: str, *args: str, stdin: str = "", timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (``org.apache.kafka.tools.ConsoleProducer``,
    ...) from the jars, as its ``bin/*.sh`` script would."""
    return subprocess.run(
        [*java_command(), "-cp", f"{JARS}/*", main_class, *args],
        input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: where it listens (``host:port``), and its process."""

    address: str
    pid: int


@contextmanager
def kafka_broker(directory: Path) -> Iterator[KafkaBroker]:
    """A started broker with its data in ``directory``. Fails (never skips) without the
    jars; kills the broker however the block ends."""
    classpath = f"{JARS}/*"
    if not list(JARS.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka broker jars in {JARS}: run `make kafka-jars` (Maven)")
    port, controller_port = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(server_properties(directory, port, controller_port))
    java = java_command()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # "=": a random id may start with "-", which would read as an option.
    formatted = subprocess.run(
        [*java, "-cp", classpath, "kafka.tools.StorageTool", "format",
         f"--cluster-id={cluster_id}", f"--config={config}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if formatted.returncode != 0:
        raise RuntimeError(f"formatting the broker's storage failed: {formatted.stderr[-2000:]}")
    log = (directory / "broker.log").open("wb")
    broker = subprocess.Popen(
        [*java, "-Xmx512m", "-cp", classpath, "kafka.Kafka", str(config)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:

        def listens() -> bool:
            if broker.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited: {directory / 'broker.log'}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        # The port first: a client before it would log every refused connection.
        wait_for(listens, 60, f"the Kafka broker on {address}", interval_s=0.2)
        admin = AdminClient({"bootstrap.servers": address})

        def answers() -> bool:
            try:
                return bool(admin.list_topics(timeout=1).brokers)
            except KafkaException:
                return False

        wait_for(answers, 60, f"the Kafka broker on {address} to answer", interval_s=0.2)
        yield KafkaBroker(address, broker.pid)
    finally:
        with_group = os.getpgid(broker.pid) if broker.poll() is None else None
        if with_group is not None:
            os.killpg(with_group, signal.SIGKILL)
        broker.wait(30)
        log.close()
