"""``delayline run --kafka``: due messages go to a real Kafka broker's topics.

The standard workload (near and far messages, a burst, cancels, raw records of
every kind of wrong) goes in through Redis, as today; the scheduler is killed
(SIGKILL) while deliveries flow, and started again. Every message reaches its
Kafka topic at least once, keyed by its key, none early, none of the cancelled
ones; a repeat is possible only for a message the kill caught between Kafka's
acknowledgement and Redis's settle. Every bad record is kept as a reject.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from delayline.kafka import records
from delayline.redis.embedded import EmbeddedRedis
from delayline.scheduler.pump import PUMP_BATCH
from tests.e2e.harness import (
    SMALL_WHEEL,
    TOPICS,
    Arrival,
    SchedulerProcess,
    check_at_least_once,
    kill_at,
    pipeline_state,
    send_workload,
    settled,
    wait_for,
)
from tests.kafka.broker import kafka_broker

pytestmark = pytest.mark.spark


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "kafka"
    directory.mkdir()
    with kafka_broker(directory) as broker:
        address = broker.address
        admin = AdminClient({"bootstrap.servers": address})
        for future in admin.create_topics([NewTopic(t, 3, 1) for t in TOPICS]).values():
            future.result(30)
        yield address


class KafkaArrivals:
    """What a consumer of every topic has received so far, as arrivals."""

    def __init__(self, brokers: str) -> None:
        self.found: list[Arrival] = []
        self._consumer = Consumer(
            {"bootstrap.servers": brokers, "group.id": "e2e", "auto.offset.reset": "earliest"}
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


def test_kafka_topics_get_every_message_at_least_once_across_a_kill(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path, brokers: str
) -> None:
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir), *SMALL_WHEEL]
    args += ["--kafka", brokers]
    received = KafkaArrivals(brokers)
    with ExitStack() as runs:
        runs.callback(received.close)
        first = runs.enter_context(SchedulerProcess(args))
        workload = send_workload(own_redis.url, max_delay_ms=15_000)
        wait_for(lambda: len(received()) >= 200, 60, "the first deliveries", [first])
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
        # The kill catches at most one flush of each pump: Kafka acknowledged it,
        # Redis never settled it, and the restart produces it again.
        assert repeats <= PUMP_BATCH, f"{repeats} repeats: more than the kill could catch"
    # No Redis stream was written for a topic.
    assert not any(own_raw.exists(topic) for topic in TOPICS)
