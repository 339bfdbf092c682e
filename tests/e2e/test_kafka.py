"""``delayline run --kafka``: due messages go to a real Kafka broker's topics.

The standard workload (near and far messages, a burst, cancels, raw records of
every kind of wrong) goes in through the Kafka inbound topic and through Redis;
the scheduler is killed (SIGKILL) while deliveries flow, and started again.
Every message reaches its Kafka topic at least once, keyed by its key, none
early, none of the cancelled ones; a repeat is possible only for a message the
kill caught between Kafka's acknowledgement and Redis's settle. Every bad
record is kept as a reject.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from delayline import Client
from delayline.ids import deliver_at_ms_of
from delayline.kafka import records
from delayline.kafka.producer import KafkaInboundProducer
from delayline.model import Message
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import SMALL_WHEEL
from delayline.testing.kafka import kafka_broker, kafka_tool
from delayline.testing.streams import Arrival
from delayline.timing import now_ms
from tests.support.harness import (
    TOPICS,
    SchedulerProcess,
    check_at_least_once,
    kill_at,
    pipeline_state,
    settled,
    wait_for,
    workload_records,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "kafka"
    directory.mkdir()
    with kafka_broker(directory) as broker:
        address = broker.address
        admin = AdminClient({"bootstrap.servers": address})
        # The inbound topic too: a producer may write before the scheduler creates it.
        topics = [*TOPICS, records.INBOUND_TOPIC]
        for future in admin.create_topics([NewTopic(t, 3, 1) for t in topics]).values():
            future.result(30)
        yield address


class KafkaArrivals:
    """What a consumer of every topic has received so far, as arrivals."""

    def __init__(self, brokers: str) -> None:
        self.found: list[Arrival] = []
        self._consumer = Consumer(
            {
                "bootstrap.servers": brokers,
                "group.id": "e2e",
                "auto.offset.reset": "earliest",
                # What a consumer of exactly-once delivery reads: committed records only.
                "isolation.level": "read_committed",
            }
        )
        self._consumer.subscribe(list(TOPICS))

    def __call__(self) -> list[Arrival]:
        for message in self._consumer.consume(10_000, 0.2):
            if message.error() is not None:
                continue
            headers = dict(message.headers() or [])
            self.found.append(
                Arrival(
                    message_id=headers[records.ID_HEADER].decode(),
                    topic=message.topic() or "",
                    body=message.value() or b"",
                    key=(message.key() or b"").decode(),
                    deliver_at_ms=int(headers[records.DELIVER_AT_HEADER]),
                    delivered_at_ms=int(headers[records.DELIVERED_AT_HEADER]),
                    # The producer's clock when the pump produced it (CreateTime).
                    stream_ms=message.timestamp()[1],
                )
            )
        return self.found

    def close(self) -> None:
        self._consumer.close()


def test_kafka_in_and_out_every_message_exactly_once_across_a_kill(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path, brokers: str
) -> None:
    """The workload's records produced to the inbound topic's 3 partitions, raw
    cancels and bad records among them, then more of them written to the Redis
    inbound stream, and a few sends through the SDK's ``Client(kafka=...)``; the
    scheduler, delivering with ``--kafka-delivery exactly-once``, is killed while it
    reads both and delivers. A read_committed consumer sees each message once (the
    kill at each single step of a flush: tests/integration/test_kafka_delivery.py)."""
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir), *SMALL_WHEEL]
    args += ["--kafka", brokers, "--kafka-delivery", "exactly-once"]
    received = KafkaArrivals(brokers)
    with ExitStack() as runs:
        runs.callback(received.close)
        first = runs.enter_context(SchedulerProcess(args))
        workload, inbound = workload_records(
            total=2_000, max_delay_ms=15_000, burst=300, malformed=20, seed=11
        )
        producer = KafkaInboundProducer(brokers)
        producer.send(inbound[:1_000])
        producer.close()
        with Client(own_redis.url, kafka=brokers) as client:
            sdk = [
                Message.create(
                    TOPICS[0],
                    f"sdk-{n}",
                    now_ms=now_ms(),
                    limits=client.limits,
                    delay=n * 500,
                    key=f"sdk{n}",
                )
                for n in range(10)
            ]
            assert client.send_many(sdk) == [m.id for m in sdk]
        workload.messages.update((m.id, m) for m in sdk)
        wait_for(lambda: len(received()) >= 200, 90, "the first deliveries", [first])
        # The rest through Redis, as the SDK's Redis path and raw producers write.
        pipe = own_raw.pipeline(transaction=False)
        for record in inbound[1_000:]:
            pipe.xadd(keys.INBOUND, dict(record))  # type: ignore[arg-type]
        pipe.execute()
        kill_at(first, data_dir, in_flight=True)
        second = runs.enter_context(SchedulerProcess(args))
        wait_for(
            lambda: settled(own_raw, workload) and len(received()) >= len(workload.expected),
            120,
            "every message to be settled",
            [first, second],
            details=lambda: pipeline_state(own_raw, data_dir),
        )
        repeats = check_at_least_once(own_raw, workload, received())
        # A flush Kafka committed and Redis never settled is settled after the
        # restart from the pump's progress record, not produced again.
        assert repeats == 0, f"{repeats} repeats under exactly-once"
        # Status answers for a message that came in through Kafka.
        with Client(own_redis.url) as client:
            assert client.status(sdk[-1].id).state == "delivered"
    # No Redis stream was written for a topic.
    assert not any(own_raw.exists(topic) for topic in TOPICS)


def test_the_readme_quickstart_console_producer_in_console_consumer_out(
    own_redis: EmbeddedRedis, data_dir: Path, brokers: str
) -> None:
    """A send record written by kafka-console-producer, and one sent with
    ``delayline send --kafka``, as docs/kafka.md shows, reach kafka-console-consumer on
    time, each with its id in a header."""
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir), *SMALL_WHEEL]
    cli = [sys.executable, "-m", "delayline"]
    with SchedulerProcess([*args, "--kafka", brokers]) as scheduler:
        made = subprocess.run(
            [*cli, "kafka-headers", "orders.timeout", "--delay", "3s"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        headers = made.stdout.strip()
        fields = dict(part.split(":", 1) for part in headers.split(","))
        produced = kafka_tool(
            "org.apache.kafka.tools.ConsoleProducer",
            *("--bootstrap-server", brokers, "--topic", records.INBOUND_TOPIC),
            *("--property", "parse.headers=true"),
            stdin=f"{headers}\tclose order 42\n",
        )
        assert produced.returncode == 0, produced.stderr
        sent = subprocess.run(
            [*cli, "send", "orders.timeout", "close order 43", "--delay", "2s", "--key", "43",
             "--kafka", brokers, "--redis-url", own_redis.url],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        due_ms = {fields["id"]: int(fields["deliver_at_ms"])}
        due_ms[sent.stdout.strip()] = deliver_at_ms_of(sent.stdout.strip())
        consumed = kafka_tool(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            *("--bootstrap-server", brokers, "--topic", "orders.timeout", "--from-beginning"),
            *("--max-messages", "2", "--timeout-ms", "120000"),
            *("--property", "print.headers=true", "--property", "print.timestamp=true"),
            timeout_s=150,
        )
        assert consumed.returncode == 0, (consumed.stderr, scheduler)
    bodies = set()
    for line in consumed.stdout.strip().splitlines():
        # CreateTime:<ms>\t<headers>\t<value>
        stamp, printed_headers, value = line.split("\t")
        found = dict(h.split(":", 1) for h in printed_headers.split(","))
        assert int(stamp.removeprefix("CreateTime:")) >= due_ms[found[records.ID_HEADER]], "early"
        bodies.add(value)
    assert bodies == {"close order 42", "close order 43"}
