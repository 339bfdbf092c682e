"""A real Kafka broker for tests and benchmarks: one KRaft node (broker and controller)
on loopback, from the jars that ``kafka-pom.xml`` (beside this module) names.

Fetch them once with Maven (``make kafka-jars`` in a checkout does this)::

    mvn -f <this folder>/kafka-pom.xml dependency:copy-dependencies \\
        -DoutputDirectory=$PWD/build/kafka-jars -DincludeScope=runtime

They are looked for in ``$DELAYLINE_KAFKA_JARS``, else in ``build/kafka-jars``
under the working directory. Starting a broker needs Java 17+ and confluent-kafka
(the ``kafka`` extra), imported only then.
"""

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

from delayline.errors import ConfigurationError, TransportError
from delayline.testing import free_port, wait_for

#: The Maven project whose runtime dependencies are the broker and Kafka's tools.
POM = Path(__file__).with_name("kafka-pom.xml")
#: Names the folder of the jars, overriding DEFAULT_JARS.
JARS_VARIABLE = "DELAYLINE_KAFKA_JARS"
#: Where ``make kafka-jars`` puts the jars, relative to the working directory.
DEFAULT_JARS = Path("build/kafka-jars")
#: How long the broker may take to listen, then to answer a metadata request (s).
START_TIMEOUT_S = 60.0


def jars() -> Path:
    """The folder of the broker's jars: ``$DELAYLINE_KAFKA_JARS``, else DEFAULT_JARS."""
    return Path(os.environ.get(JARS_VARIABLE, DEFAULT_JARS))


def server_properties(directory: Path, port: int, controller_port: int) -> str:
    """The broker's ``server.properties``: one node, data in ``directory``, no
    automatic topics (a message to a topic that was not created is refused)."""
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
    ...) from the jars, as its ``bin/*.sh`` script would; ``timeout_s`` in seconds.

    Raises subprocess.TimeoutExpired if it runs longer; a failure is in the result.
    """
    return subprocess.run(
        [*java_command(), "-cp", f"{jars()}/*", main_class, *args],
        input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: where it listens (``host:port``), and its process."""

    address: str
    pid: int


@contextmanager
def kafka_broker(directory: Path) -> Iterator[KafkaBroker]:
    """A started broker with its data and ``broker.log`` in ``directory``; it is killed
    however the block ends.

    Raises ConfigurationError without the jars (it never skips), and TransportError if
    the broker's storage cannot be formatted or the broker exits while starting.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    folder = jars()
    if not list(folder.glob("kafka_2.13-*.jar")):
        raise ConfigurationError(
            f"no Kafka broker jars in {folder}: fetch them with Maven from {POM} "
            "(`make kafka-jars` in a checkout)"
        )
    classpath = f"{folder}/*"
    port, controller_port = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(server_properties(directory, port, controller_port))
    java = java_command()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # "=": a random id may start with "-", which would read as an option.
    formatted = subprocess.run(
        [*java, "-cp", classpath, "kafka.tools.StorageTool", "format",
         f"--cluster-id={cluster_id}", f"--config={config}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if formatted.returncode != 0:
        raise TransportError(f"formatting the broker's storage failed: {formatted.stderr[-2000:]}")
    log = (directory / "broker.log").open("wb")
    broker = subprocess.Popen(
        [*java, "-Xmx512m", "-cp", classpath, "kafka.Kafka", str(config)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:

        def listens() -> bool:
            if broker.poll() is not None:
                raise TransportError(f"the Kafka broker exited: {directory / 'broker.log'}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        # The port first: a client before it would log every refused connection.
        wait_for(listens, START_TIMEOUT_S, f"the Kafka broker on {address}", interval_s=0.2)
        admin = AdminClient({"bootstrap.servers": address})

        def answers() -> bool:
            try:
                return bool(admin.list_topics(timeout=1).brokers)
            except KafkaException:
                return False

        wait_for(
            answers, START_TIMEOUT_S, f"the Kafka broker on {address} to answer", interval_s=0.2
        )
        yield KafkaBroker(address, broker.pid)
    finally:
        with_group = os.getpgid(broker.pid) if broker.poll() is None else None
        if with_group is not None:
            os.killpg(with_group, signal.SIGKILL)
        broker.wait(30)
        log.close()
