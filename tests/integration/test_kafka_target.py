"""Kafka topics as delivery targets, against a real broker (KRaft, on loopback).

A shard whose target is Kafka readies its due messages; its pump produces them
to their topics, with the message's key as the record's key and its id and
times as headers, and settles them in Redis once the broker has acknowledged
them. A topic the broker does not have makes a reject, as a Redis key of
another type does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import closing

import pytest
import redis
from confluent_kafka import Consumer
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient, NewTopic

from delayline import Client
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.kafka import records
from delayline.kafka.consumer import REASON_HEADER, retry_later
from delayline.kafka.flushing import flusher_for
from delayline.kafka.target import target_url
from delayline.kafka.topics import UNKNOWN_TOPIC_MS
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.retry import RetryPolicy
from delayline.scheduler.pump import Pump
from delayline.testing import wait_for
from delayline.testing.kafka import kafka_broker
from delayline.timing import now_ms
from tests.support.sinking import delivered


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as broker:
        address = broker.address
        admin = AdminClient({"bootstrap.servers": address})
        for future in admin.create_topics(
            [NewTopic(t, 3, 1) for t in ("orders", "sunk", "retried", "retried.DLQ")]
        ).values():
            future.result(30)
        yield address


@pytest.fixture
def kafka_redis(redis_url: str, brokers: str) -> str:
    """The emptied Redis, its (unsharded) delivery keys aimed at the broker's topics."""
    with closing(DeliveryStore.from_url(redis_url)) as store:
        store.set_target([keys.UNSHARDED], target_url(brokers))
        store.publish_config(60_000, 1)
    return redis_url


def consume(brokers: str, topic: str, count: int, timeout_s: float = 30) -> list[KafkaMessage]:
    """The first ``count`` records of ``topic`` (every partition, from the start)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": new_message_id(0),
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    found: list[KafkaMessage] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(found) < count and time.monotonic() < deadline:
            found += [m for m in consumer.consume(count, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return found


def test_a_pump_delivers_to_kafka_on_time_keyed_and_once(
    kafka_redis: str, raw_redis: redis.Redis, brokers: str
) -> None:
    pump = Pump(kafka_redis, journal_ttl_s=3_600)
    pump.start()
    try:
        with Client(kafka_redis) as client:
            due_ms = now_ms() + 1_000
            sent = [
                client.send("orders", f"body {n}", deliver_at=due_ms + n, key=f"k{n % 4}",
                            headers={"trace": str(n)})
                for n in range(20)
            ]  # fmt: skip
            cancelled = sent.pop()
            assert client.cancel(cancelled)
            found = consume(brokers, "orders", len(sent))
            wait_for(
                lambda: client.metrics().stats.get("delivered") == len(sent),
                10,
                "the deliveries to be settled",
            )
            assert client.status(sent[0]).state == "delivered"
            assert client.status(cancelled).state == "cancelled"
            assert client.metrics().stats["dropped"] == 1
    finally:
        pump.stop()
    received_ms = now_ms()
    headers = [dict(m.headers() or []) for m in found]
    ids = [h[records.ID_HEADER].decode() for h in headers]
    assert sorted(ids) == sorted(sent)  # each once, the cancelled one never
    by_key: dict[bytes, set[int]] = {}
    for message, header in zip(found, headers, strict=True):
        n = int(header["trace"])
        assert message.value() == f"body {n}".encode()
        assert message.key() == f"k{n % 4}".encode()
        by_key.setdefault(message.key() or b"", set()).add(message.partition() or 0)
        due = int(header[records.DELIVER_AT_HEADER])
        assert due == deliver_at_ms_of(header[records.ID_HEADER].decode())
        # Never early, by the time the pump wrote it, nor by the broker's clock.
        assert int(header[records.DELIVERED_AT_HEADER]) >= due
        assert message.timestamp()[1] >= due
        assert header[records.ATTEMPT_HEADER] == b"1"
    assert all(len(partitions) == 1 for partitions in by_key.values())  # the key partitions
    assert received_ms >= max(int(h[records.DELIVER_AT_HEADER]) for h in headers)
    assert not raw_redis.exists("orders")  # no Redis stream of that name
    assert raw_redis.xlen(keys.UNSHARDED.ready) == 0


def test_a_sink_chunk_readies_what_is_due_and_rings_the_pump(
    kafka_redis: str, raw_redis: redis.Redis, brokers: str
) -> None:
    message_id = new_message_id(now_ms() - 10)
    with closing(DeliveryStore.from_url(kafka_redis)) as store:
        store.write_chunk(
            query_id="q", partition=0, batch_id=1, first_row=0, journal_ttl_s=3_600,
            rows=[delivered(message_id, topic="sunk", headers=json.dumps({"a": "b"}))],
        )  # fmt: skip
    # Journalled and ready, the pump's bell rung; not yet in Kafka, nor counted.
    assert raw_redis.xlen(keys.UNSHARDED.ready) == 1
    assert raw_redis.llen(keys.UNSHARDED.outbox_bell) == 1
    assert raw_redis.hget(keys.STATS, "delivered") is None
    pump = Pump(kafka_redis, journal_ttl_s=3_600)
    pump.start()
    try:
        [record] = consume(brokers, "sunk", 1)
        wait_for(lambda: raw_redis.hget(keys.STATS, "delivered") == b"1", 10, "the settle")
    finally:
        pump.stop()
    assert dict(record.headers() or [])[records.ID_HEADER] == message_id.encode()
    assert dict(record.headers() or [])["a"] == b"b"
    assert record.key() is None  # the message had none


def test_a_topic_kafka_does_not_have_keeps_its_message_as_a_reject(
    kafka_redis: str, raw_redis: redis.Redis
) -> None:
    message_id = new_message_id(now_ms() - 10)
    with closing(DeliveryStore.from_url(kafka_redis)) as store:
        store.write_chunk(
            query_id="q", partition=0, batch_id=1, first_row=0, journal_ttl_s=3_600,
            rows=[delivered(message_id, topic="nowhere")],
        )  # fmt: skip
        flusher = flusher_for(store.target_of(keys.UNSHARDED), "delayline-pump-test")
        assert flusher is not None
        flusher.flush(store, keys.UNSHARDED, 3_600)
        # Held while Kafka is asked again, then refused once its budget is spent.
        assert raw_redis.xlen(keys.REJECTS) == 0
        wait_for(
            lambda: flusher.flush(store, keys.UNSHARDED, 3_600) and raw_redis.xlen(keys.REJECTS),
            UNKNOWN_TOPIC_MS / 1000 + 5,
            "the reject",
        )
        flusher.close()
    [(_, reject)] = raw_redis.xrange(keys.REJECTS)
    assert reject[b"id"] == message_id.encode()
    assert reject[b"reason"].startswith(b"cannot deliver to topic nowhere: ")
    assert b"Unknown topic" in reject[b"reason"]
    assert not raw_redis.hexists(keys.journal(deliver_at_ms_of(message_id)), message_id)
    assert raw_redis.hget(keys.STATS, "rejected") == b"1"
    assert raw_redis.xlen(keys.UNSHARDED.ready) == 0


def test_a_consumer_retries_a_record_as_its_next_attempt_then_dead_letters_it(
    kafka_redis: str, brokers: str
) -> None:
    pump = Pump(kafka_redis, journal_ttl_s=3_600)
    pump.start()
    policy = RetryPolicy([200])  # one retry, 200 ms later
    try:
        with Client(kafka_redis) as client:
            first_id = client.send("retried", b"payload", key="k", headers={"trace": "t"})
            [first] = consume(brokers, "retried", 1)
            assert retry_later(client, first, policy=policy) is True
            [_, second] = consume(brokers, "retried", 2)
            assert retry_later(client, second, policy=policy) is False
            [dead] = consume(brokers, "retried.DLQ", 1)
    finally:
        pump.stop()
    headers = [dict(record.headers() or []) for record in (first, second, dead)]
    assert headers[0][records.ID_HEADER] == first_id.encode()
    assert [h[records.ATTEMPT_HEADER] for h in headers] == [b"1", b"2", b"2"]
    # The retry is a new message, due the policy's delay after the first was delivered.
    assert headers[1][records.ID_HEADER] != first_id.encode()
    first_delivered_ms = int(headers[0][records.DELIVERED_AT_HEADER])
    assert int(headers[1][records.DELIVER_AT_HEADER]) >= first_delivered_ms + 200
    for record, header in zip((second, dead), headers[1:], strict=True):
        assert (record.value(), record.key(), header["trace"]) == (b"payload", b"k", b"t")
    assert headers[2][REASON_HEADER] == b"no retries left after 1"
