"""Reschedule against a real Redis: from the outbox at once, from the scheduler's state
when the sink drops the old message (its rows written as the scheduler writes them)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from delayline import Client, MessageStateError
from delayline.errors import ValidationError
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.model import decode_record
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Drop
from delayline.testing import wait_for
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.sinking import count_inbound, delivered, dropped, sink


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


def pump_until(redis_url: str, raw: redis.Redis, topic: str, count: int) -> None:
    store = DeliveryStore.from_url(redis_url)
    try:

        def arrived() -> bool:
            store.pump(1_000, journal_ttl_s=3600)
            return raw.xlen(topic) >= count

        wait_for(arrived, 10, f"{count} deliveries on {topic}", interval_s=0.02)
    finally:
        store.close()


def test_a_message_in_the_outbox_moves_at_once(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    old = client.send("orders", b"order-42", delay=timedelta(seconds=30), key="42")
    before_ms = now_ms()
    new = client.reschedule(old, delay=timedelta(milliseconds=300))
    assert before_ms + 300 <= deliver_at_ms_of(new) <= now_ms() + 300
    status = client.status(old)
    assert (status.state, status.rescheduled_to) == ("rescheduled", new)
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [new.encode()]
    assert raw_redis.hget(keys.journal(deliver_at_ms_of(old)), old) == f"rescheduled:{new}".encode()
    assert client.pending(topic="orders").total == 1
    pump_until(redis_url, raw_redis, "orders", 1)
    [(entry_id, fields)] = raw_redis.xrange("orders")
    assert (fields[b"id"], fields[b"body"], fields[b"key"]) == (new.encode(), b"order-42", b"42")
    assert int(entry_id.split(b"-")[0]) >= deliver_at_ms_of(new), "delivered early"
    assert client.pending().total == 0
    with pytest.raises(MessageStateError, match="it is rescheduled") as refused:
        client.reschedule(old, delay=1_000)
    assert refused.value.state == "rescheduled"
    with pytest.raises(MessageStateError, match="it is delivered"):
        client.reschedule(new, delay=1_000)


def test_a_message_in_the_scheduler_is_withdrawn_and_sent_again_by_the_drop(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    old = client.send("orders", b"order-7", delay=timedelta(minutes=10), headers={"h": "v"})
    count_inbound(redis_url)
    raw_redis.delete(keys.INBOUND)  # the scheduler has it now
    new = client.reschedule(old, delay=timedelta(milliseconds=500))
    assert client.status(old).rescheduled_to == new
    [(_, record)] = raw_redis.xrange(keys.INBOUND)
    cancel = decode_record(record, received_ms=now_ms(), limits=Limits())
    assert (cancel.id, getattr(cancel, "rescheduled_to", None)) == (old, new)
    assert client.pending().total == 0  # the old one left the forecast at once
    # The scheduler withdraws it from its state: the sink's drop sends the copy.
    row = Drop("orders", old, b"order-7", "", '{"h":"v"}', deliver_at_ms_of(old), 1)
    sink(redis_url, row)
    sink(redis_url, row)  # a copy of the old message, dropped later: a duplicate
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [new.encode()]
    assert client.pending(topic="orders").total == 1
    pump_until(redis_url, raw_redis, "orders", 1)
    [(_, fields)] = raw_redis.xrange("orders")
    assert (fields[b"id"], fields[b"body"], fields[b"headers"]) == (
        new.encode(),
        b"order-7",
        b'{"h":"v"}',
    )
    assert client.pending().total == 0
    counters = client.metrics().counters
    assert (counters["duplicates"], counters["delivered"]) == (1, 1)


def test_a_copy_due_beyond_the_horizon_goes_back_to_the_inbound_stream(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    old = client.send("reminders", b"call", delay=timedelta(minutes=10))
    raw_redis.delete(keys.INBOUND)
    new = client.reschedule(old, delay=timedelta(hours=2))
    raw_redis.delete(keys.INBOUND)
    sink(redis_url, dropped(old, "reminders"))
    [(entry_id, record)] = raw_redis.xrange(keys.INBOUND)
    message = decode_record(record, received_ms=int(entry_id.split(b"-")[0]), limits=Limits())
    assert (message.id, getattr(message, "topic", None)) == (new, "reminders")
    assert message.deliver_at_ms == deliver_at_ms_of(new)
    assert raw_redis.zcard(keys.OUTBOX) == 0


def test_what_cannot_be_rescheduled_is_refused(client: Client, redis_url: str) -> None:
    shipped = client.send("t", b"x")
    sink(redis_url, delivered(shipped))
    with pytest.raises(MessageStateError, match=f"cannot reschedule message {shipped}"):
        client.reschedule(shipped, delay=1_000)
    cancelled = client.send("t", b"x", delay=timedelta(minutes=10))
    assert client.cancel(cancelled)
    with pytest.raises(MessageStateError, match="it is cancelled"):
        client.reschedule(cancelled, delay=1_000)
    forgotten = new_message_id(now_ms() - 3_600_000)
    # Unknown once the scheduler has run well past its time with no record of it.
    raw = redis.Redis.from_url(redis_url)
    raw.hset(keys.HEARTBEAT, "last_batch_at_ms", now_ms())
    raw.close()
    with pytest.raises(MessageStateError, match="it is unknown"):
        client.reschedule(forgotten, delay=1_000)
    pending = client.send("t", b"x", delay=timedelta(minutes=10))
    with pytest.raises(ValidationError, match="only one of"):
        client.reschedule(pending, delay=1_000, level=3)
    assert client.status(pending).state == "pending"  # a refused reschedule wrote nothing
