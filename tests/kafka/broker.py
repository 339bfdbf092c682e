"""A real Kafka broker for the tests: one KRaft node (broker and controller) on
loopback, from the jars that ``make kafka-jars`` fetches from Maven Central."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def kafka_broker(directory: Path) -> Iterator[str]:
    """A started broker with its data in ``directory``; yields its ``host:port``. Fails
    (never skips) without the jars; kills the broker however the block ends."""
    classpath = f"{JARS}/*"
    if not list(JARS.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka broker jars in {JARS}: run `make kafka-jars` (Maven)")
    port, controller_port = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(server_properties(directory, port, controller_port))
    java = (
        [os.path.join(os.environ["JAVA_HOME"], "bin", "java")]
        if "JAVA_HOME" in os.environ
        else ["java"]
    )
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    subprocess.run(
        [*java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
         "-c", str(config)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    log = (directory / "broker.log").open("wb")
    broker = subprocess.Popen(
        [*java, "-Xmx512m", "-cp", classpath, "kafka.Kafka", str(config)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": address})

        def answers() -> bool:
            if broker.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited: {directory / 'broker.log'}")
            try:
                return bool(admin.list_topics(timeout=1).brokers)
            except KafkaException:
                return False

        wait_for(answers, 60, f"the Kafka broker on {address}", interval_s=0.2)
        yield address
    finally:
        with_group = os.getpgid(broker.pid) if broker.poll() is None else None
        if with_group is not None:
            os.killpg(with_group, signal.SIGKILL)
        broker.wait(30)
        log.close()
