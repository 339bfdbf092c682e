"""Delivery into Kafka against a real broker: no topic holds back another, and the
exactly-once mode survives a kill at every step of a flush.

A flush reads the shard's ready entries, produces them (in one transaction, in
exactly-once mode, with the pump's progress record), and settles them in Redis.
The crash-point tests kill a pump process (DELAYLINE_CRASH_AT, delayline/faults.py)
before the produce, after it and before the commit, after the commit and before
the settle, and after the settle; a second pump then finishes the work. A
``read_committed`` consumer must see each id exactly once in exactly-once mode;
at least once, a repeat may appear only when the kill fell between the produce
and the settle (docs/design.md).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from delayline import Client
from delayline.faults import CRASH_AT_ENV
from delayline.ids import new_message_id
from delayline.kafka import records, writers
from delayline.kafka.target import KafkaDelivery, target_url
from delayline.kafka.topics import UNKNOWN_TOPIC_MS
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.scheduler.pump import Pump
from delayline.testing import wait_for
from delayline.testing.kafka import kafka_broker
from delayline.timing import now_ms
from tests.support.sinking import delivered

MODES = [KafkaDelivery.AT_LEAST_ONCE, KafkaDelivery.EXACTLY_ONCE]
POINTS = [
    writers.CRASH_BEFORE_PRODUCE,
    writers.CRASH_BEFORE_COMMIT,
    writers.CRASH_BEFORE_SETTLE,
    writers.CRASH_AFTER_SETTLE,
]
#: The points between a produce and its settle: at least once, a kill there may repeat.
MAY_REPEAT = {writers.CRASH_BEFORE_COMMIT, writers.CRASH_BEFORE_SETTLE}
BATCHES = itertools.count(1)
TOPICS = [f"crash.{mode.value}.{point}" for mode in MODES for point in POINTS]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as broker:
        admin = AdminClient({"bootstrap.servers": broker.address})
        steady = [f"steady.{mode.value}.{name}" for mode in MODES for name in ("orders", "audit")]
        new = [NewTopic(t, 2, 1) for t in (*steady, *TOPICS)]
        # A topic that refuses records over 2,000 bytes: a refusal for good.
        new += [
            NewTopic(f"small.{mode.value}", 1, 1, config={"max.message.bytes": "2000"})
            for mode in MODES
        ]
        for future in admin.create_topics(new).values():
            future.result(30)
        yield broker.address


def aim(redis_url: str, brokers: str, mode: KafkaDelivery) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store:
        store.set_target([keys.UNSHARDED], target_url(brokers, mode))
        store.publish_config(60_000, 1)


def ready(redis_url: str, messages: list[tuple[str, str]], body: bytes = b"x") -> None:
    """Put (id, topic) messages in the unsharded ready stream, due now, as the sink would
    (each call a batch of its own)."""
    with closing(DeliveryStore.from_url(redis_url)) as store:
        store.write_chunk(
            query_id="q", partition=0, batch_id=next(BATCHES), first_row=0, journal_ttl_s=3_600,
            rows=[delivered(message_id, topic=topic, body=body) for message_id, topic in messages],
        )  # fmt: skip


def read_all(brokers: str, topic: str, *, committed: bool) -> list[str]:
    """The ids of every record of ``topic``, to its end (the last stable offset when
    ``committed``: what a read_committed consumer sees)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": new_message_id(0),
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
        }
    )
    ids: list[str] = []
    try:
        listed = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        partitions = [TopicPartition(topic, p) for p in sorted(listed)]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p.partition, 0) for p in partitions])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    ids.append(dict(message.headers() or [])[records.ID_HEADER].decode())
            positions = consumer.position(partitions)
            if all(p.offset >= ends[p.partition] for p in positions):
                return ids
        raise AssertionError(f"{topic} not read to its end: {consumer.position(partitions)}")
    finally:
        consumer.close()


def run_pump(redis_url: str, count: int, crash_at: str | None = None) -> int:
    """A pump process's exit code once ``count`` are settled (or it crashed)."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_AT_ENV}
    if crash_at is not None:
        env[CRASH_AT_ENV] = crash_at
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.pump_process", redis_url, str(count)], env=env
    )
    try:
        return process.wait(timeout=150)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_step_of_a_flush(
    redis_url: str, raw_redis: redis.Redis, brokers: str, mode: KafkaDelivery, point: str
) -> None:
    topic = f"crash.{mode.value}.{point}"
    aim(redis_url, brokers, mode)
    sent = [new_message_id(now_ms() - 100) for _ in range(40)]
    ready(redis_url, [(message_id, topic) for message_id in sent])
    assert run_pump(redis_url, len(sent), crash_at=point) == -9
    assert run_pump(redis_url, len(sent)) == 0
    stats = raw_redis.hgetall(keys.STATS)
    assert int(stats[b"delivered"]) == len(sent)  # each settled once, none rejected
    assert b"rejected" not in stats
    exactly_once = mode is KafkaDelivery.EXACTLY_ONCE
    seen = Counter(read_all(brokers, topic, committed=exactly_once))
    assert set(seen) == set(sent)  # nothing lost, nothing unknown
    repeats = sum(n - 1 for n in seen.values())
    if exactly_once or point not in MAY_REPEAT:
        assert repeats == 0, seen
    else:
        assert repeats <= len(sent)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_an_unknown_topic_never_holds_back_the_others(
    redis_url: str, raw_redis: redis.Redis, brokers: str, mode: KafkaDelivery
) -> None:
    aim(redis_url, brokers, mode)
    pump = Pump(redis_url, journal_ttl_s=3_600)
    pump.start()
    try:
        # A producer's first write waits for the broker (its id, a fresh coordinator).
        warm = new_message_id(now_ms())
        ready(redis_url, [(warm, f"steady.{mode.value}.orders")])
        wait_for(lambda: raw_redis.hget(keys.STATS, "delivered") == b"1", 30, "a first delivery")
        lost = new_message_id(now_ms() - 10)
        ready(redis_url, [(lost, "no.such.topic")])
        started_ms = now_ms()
        # One message to an unknown topic, then a steady stream to two real ones.
        sent = [warm]
        for n in range(20):
            batch = [
                (new_message_id(now_ms()), f"steady.{mode.value}.{('orders', 'audit')[n % 2]}")
            ]
            ready(redis_url, batch)
            sent += [message_id for message_id, _ in batch]
            time.sleep(0.05)  # a steady stream, not a wait for a result
        wait_for(
            lambda: int(raw_redis.hget(keys.STATS, "delivered") or 0) == len(sent),
            UNKNOWN_TOPIC_MS / 1000 / 2,
            "every message to a known topic, long before the unknown one's budget is spent",
        )
        # The unknown topic's message waits apart, and is shown waiting.
        assert raw_redis.xlen(keys.REJECTS) == 0
        with Client(redis_url) as client:
            metrics = wait_for(
                lambda: (m := client.metrics()).blocked_ms and m, 3, "the topic shown waiting"
            )
        assert set(metrics.blocked_ms) == {"no.such.topic"}
        assert 'delayline_delivery_blocked_seconds{topic="no.such.topic"}' in metrics.prometheus()
        wait_for(lambda: raw_redis.xlen(keys.REJECTS) == 1, 10, "the unknown topic's reject")
        rejected_after_ms = now_ms() - started_ms
    finally:
        pump.stop()
    [(_, reject)] = raw_redis.xrange(keys.REJECTS)
    assert reject[b"id"] == lost.encode()
    assert b"Unknown topic or partition" in reject[b"reason"]
    assert UNKNOWN_TOPIC_MS <= rejected_after_ms <= UNKNOWN_TOPIC_MS + 3_000
    committed = mode is KafkaDelivery.EXACTLY_ONCE
    seen = [
        found
        for name in ("orders", "audit")
        for found in read_all(brokers, f"steady.{mode.value}.{name}", committed=committed)
    ]
    assert sorted(seen) == sorted(sent)
    wait_for(lambda: not raw_redis.exists(keys.UNSHARDED.blocked), 15, "the blocked list to lapse")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_a_record_a_topic_refuses_for_good_is_a_reject_and_the_rest_go_on(
    redis_url: str, raw_redis: redis.Redis, brokers: str, mode: KafkaDelivery
) -> None:
    """The broker refuses a record too large for its topic: that message becomes a
    reject at once (in exactly-once mode its transaction aborts, and the rest of it
    is written again in the next), and the messages beside it arrive once."""
    aim(redis_url, brokers, mode)
    large = new_message_id(now_ms() - 10)
    ready(redis_url, [(large, f"small.{mode.value}")], body=b"x" * 5_000)
    beside = [(new_message_id(now_ms() - 10), f"small.{mode.value}") for _ in range(3)]
    beside += [(new_message_id(now_ms() - 10), f"steady.{mode.value}.audit") for _ in range(3)]
    ready(redis_url, beside)
    pump = Pump(redis_url, journal_ttl_s=3_600)
    pump.start()
    try:
        wait_for(
            lambda: (
                raw_redis.xlen(keys.REJECTS) == 1
                and int(raw_redis.hget(keys.STATS, "delivered") or 0) == len(beside)
            ),
            30,
            "one reject and every other message delivered",
        )
    finally:
        pump.stop()
    [(_, reject)] = raw_redis.xrange(keys.REJECTS)
    assert reject[b"id"] == large.encode()
    assert b"too large" in reject[b"reason"].lower()
    committed = mode is KafkaDelivery.EXACTLY_ONCE
    seen = read_all(brokers, f"small.{mode.value}", committed=committed)
    assert sorted(seen) == sorted(m for m, topic in beside if topic.startswith("small."))
