"""Client and AsyncClient against a real Redis, with the scheduler's writes simulated
through the same transport calls the sink makes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from delayline import AsyncClient, Client, Message, RetryPolicy
from delayline.errors import InvalidMessageIdError, ValidationError
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.model import decode_record
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Reject
from delayline.testing import wait_for
from delayline.timing import HORIZON_MS, now_ms
from delayline.validation import Limits
from tests.support.sinking import delivered, dropped, sink


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


def inbound(raw: redis.Redis) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in raw.xrange(keys.INBOUND)]


# -- producing -------------------------------------------------------------------------------


def test_send_many_sends_all_in_order(client: Client, raw_redis: redis.Redis) -> None:
    prebuilt = Message.create("t", b"m", now_ms=now_ms(), limits=Limits(), delay=90_000)
    sent = client.send_many(
        [
            {"topic": "a", "body": b"1", "delay": 1_000},
            {"topic": "b", "body": "2", "level": 6, "key": "k"},
            prebuilt,
        ]
    )
    assert sent[2] == prebuilt.id
    records = inbound(raw_redis)
    assert [r[b"id"].decode() for r in records] == sent[1:]
    assert [r[b"topic"] for r in records] == [b"b", b"t"]
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [sent[0].encode()]  # within the horizon
    assert client.send_many([]) == []


def test_send_many_validates_everything_first(client: Client, raw_redis: redis.Redis) -> None:
    batch = [{"topic": "ok", "body": b"1"}] * 5 + [{"topic": "ok", "body": b"1", "level": 42}]
    with pytest.raises(ValidationError) as caught:
        client.send_many(batch)
    assert (caught.value.field, caught.value.rule) == ("messages[5].level", "range")
    with pytest.raises(ValidationError, match="unknown argument 'colour'"):
        client.send_many([{"topic": "ok", "body": b"1", "colour": "red"}])
    with pytest.raises(ValidationError, match="message 0: topic is required") as caught:
        client.send_many([{"body": b"no topic"}])
    assert caught.value.field == "messages[0].topic"
    forged = Message(id=new_message_id(1), topic="t", body=b"", deliver_at_ms=2, sent_at_ms=0)
    with pytest.raises(ValidationError, match="new_message_id"):
        client.send_many([forged])
    assert raw_redis.exists(keys.INBOUND) == 0, "a refused batch wrote something"


def pump_until(redis_url: str, done: Callable[[], bool], timeout_s: float = 10) -> None:
    """Run the scheduler's outbox pump until ``done()``; fail after ``timeout_s`` seconds."""
    store = DeliveryStore.from_url(redis_url)

    def pumped_enough() -> bool:
        if done():
            return True
        store.pump(1_000, journal_ttl_s=3600)
        return False

    try:
        wait_for(pumped_enough, timeout_s, "the pump to finish", interval_s=0.01)
    finally:
        store.close()


def test_a_message_due_soon_skips_the_scheduler(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    message_id = client.send("soon", b"now", key="k", headers={"h": "v"})
    assert raw_redis.exists(keys.INBOUND) == 0
    assert raw_redis.zscore(keys.OUTBOX, message_id) == deliver_at_ms_of(message_id)
    assert raw_redis.hget(keys.STATS, "accepted") == b"1"
    assert client.status(message_id).state == "pending"
    pump_until(redis_url, lambda: raw_redis.xlen("soon") == 1)
    [(_, fields)] = raw_redis.xrange("soon")
    assert {k: fields[k] for k in (b"id", b"body", b"key", b"headers", b"attempt")} == {
        b"id": message_id.encode(),
        b"body": b"now",
        b"key": b"k",
        b"headers": b'{"h":"v"}',
        b"attempt": b"1",
    }
    assert int(fields[b"delivered_at_ms"]) >= deliver_at_ms_of(message_id)
    assert client.status(message_id).state == "delivered"


def test_a_cancel_wins_over_a_message_due_soon(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    message_id = client.send("soon", b"x", delay=300)
    assert client.cancel(message_id) is True
    pump_until(redis_url, lambda: raw_redis.zcard(keys.OUTBOX) == 0)
    assert raw_redis.exists("soon") == 0
    assert client.status(message_id).state == "cancelled"


def test_redis_clock_decides_what_is_due_soon(client: Client, raw_redis: redis.Redis) -> None:
    # Sent, by the producer's clock, 1 s before it is due; by Redis's clock it is due
    # in two minutes (a producer whose clock runs fast): the scheduler takes it.
    due_ms = now_ms() + 120_000
    message = Message.create("t", b"x", now_ms=due_ms - 1_000, limits=Limits(), delay=1_000)
    client.send_many([message])
    assert raw_redis.zcard(keys.OUTBOX) == 0
    assert [r[b"id"].decode() for r in inbound(raw_redis)] == [message.id]
    assert raw_redis.hget(keys.STATS, "accepted") is None  # the scheduler counts it


def test_the_horizon_the_scheduler_published_decides_the_near_path(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    assert client.send("t", b"x", delay=HORIZON_MS) in outbox(raw_redis)  # the default
    assert client.send("t", b"x", delay=HORIZON_MS + 1_000) not in outbox(raw_redis)
    raw_redis.hset(keys.CONFIG, "horizon_ms", 2_000)
    near, far = client.send("t", b"x", delay=2_000), client.send("t", b"x", delay=3_000)
    assert near in outbox(raw_redis)
    assert far not in outbox(raw_redis)
    assert [r[b"id"].decode() for r in inbound(raw_redis)][-1] == far
    # A client goes by the config it read for SHARDS_REFRESH_MS; a new one reads it.
    raw_redis.hset(keys.CONFIG, "horizon_ms", 600_000)
    with Client(redis_url) as fresh:
        assert fresh.send("t", b"x", delay=HORIZON_MS + 1_000) in outbox(raw_redis)


def test_a_resent_near_message_keeps_its_first_copy(client: Client, raw_redis: redis.Redis) -> None:
    first = Message.create("t", b"first", now_ms=now_ms(), limits=Limits(), delay=30_000)
    client.send_many([first])
    client.send_many([first])  # an SDK retry after a lost reply
    assert outbox(raw_redis) == [first.id]
    assert raw_redis.hget(keys.STATS, "accepted") == b"1"
    assert client.metrics().outbox == 1
    assert "delayline_outbox_messages 1\n" in client.metrics().prometheus()


def test_many_near_messages_go_in_calls_of_many(client: Client, raw_redis: redis.Redis) -> None:
    # 450 due within the horizon (three script calls), a duplicate among them, and
    # one past the horizon between them: each lands once, where its due time says.
    sent = now_ms()
    near = [
        Message.create("t", f"m{n}".encode(), now_ms=sent, limits=Limits(), delay=30_000 + n)
        for n in range(450)
    ]
    far = Message.create("t", b"far", now_ms=sent, limits=Limits(), delay=HORIZON_MS + 60_000)
    client.send_many([*near[:300], far, near[0], *near[300:]])
    assert sorted(outbox(raw_redis)) == sorted(message.id for message in near)
    assert [r[b"id"].decode() for r in inbound(raw_redis)] == [far.id]
    assert raw_redis.hget(keys.STATS, "accepted") == b"450"
    assert raw_redis.zscore(keys.OUTBOX, near[449].id) == near[449].deliver_at_ms


def outbox(raw: redis.Redis) -> list[str]:
    return [member.decode() for member in raw.zrange(keys.OUTBOX, 0, -1)]


# -- status through every state -------------------------------------------------------------


def test_status_through_every_state(client: Client, redis_url: str) -> None:
    pending = client.send("t", b"x", delay=60_000)
    assert client.status(pending).state == "pending"

    cancelled = client.send("t", b"x", delay=60_000)
    assert client.cancel(cancelled) is True
    assert client.status(cancelled).state == "cancelled"
    assert client.cancel(cancelled) is True  # idempotent

    shipped = client.send("t", b"x")
    sink(redis_url, delivered(shipped))
    status = client.status(shipped)
    assert status.state == "delivered"
    assert status.delivered_at_ms is not None
    assert status.delivered_at_ms >= status.deliver_at_ms
    assert client.cancel(shipped) is False  # too late

    cancelled = client.send("t", b"x")
    sink(redis_url, dropped(cancelled))
    assert client.status(cancelled).state == "cancelled"

    refused = new_message_id(now_ms())
    sink(redis_url, Reject([(b"op", b"send")], "topic must be ...", message_id=refused))
    status = client.status(refused)
    assert (status.state, status.reason) == ("rejected", "topic must be ...")
    assert client.cancel(refused) is False

    lost = new_message_id(now_ms() - 3_600_000)  # due an hour ago, and no record anywhere
    raw = redis.Redis.from_url(redis_url)
    raw.hset(keys.HEARTBEAT, mapping={"last_batch_at_ms": now_ms()})
    assert client.status(lost).state == "unknown"
    assert client.cancel(lost) is False
    with pytest.raises(InvalidMessageIdError):
        client.status("nope")


def test_cancel_request_expires_with_the_retention(redis_url: str, raw_redis: redis.Redis) -> None:
    with Client(redis_url, status_retention_ms=60_000) as sdk:
        message_id = sdk.send("t", b"x", delay=1_000)
        sdk.cancel(message_id)
    ttl_s = raw_redis.ttl(keys.cancel_requests(deliver_at_ms_of(message_id)))
    assert 60 <= ttl_s <= 60 + 2 * 60  # retention past the end of the message's minute


# -- consuming --------------------------------------------------------------------------------


def test_consume_creates_the_group_and_acks(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    message_id = client.send("orders", b"order-42", key="42", headers={"h": "v"})
    sink(redis_url, delivered(message_id, "orders", b"order-42", key="42", headers='{"h":"v"}'))
    delivery = next(client.consume("orders", "billing", block_ms=100))
    assert (delivery.id, delivery.body, delivery.key, delivery.headers, delivery.attempt) == (
        message_id,
        b"order-42",
        "42",
        {"h": "v"},
        1,
    )
    assert delivery.delivered_at >= delivery.deliver_at
    assert raw_redis.xpending("orders", "billing")["pending"] == 1
    delivery.ack()
    assert raw_redis.xpending("orders", "billing")["pending"] == 0


def test_retry_later_reschedules_the_next_attempt(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.hset(keys.CONFIG, "horizon_ms", 5_000)  # as a scheduler would publish it
    sink(redis_url, delivered(new_message_id(now_ms()), topic="calls", body=b"call-7"))
    delivery = next(client.consume("calls", "workers", block_ms=100))
    before = now_ms()
    assert delivery.retry_later() is True
    [retry] = inbound(raw_redis)
    message = decode_record(retry, received_ms=before, limits=Limits())
    assert isinstance(message, Message)
    assert (message.topic, message.body, message.attempt) == ("calls", b"call-7", 2)
    assert before + 10_000 <= message.deliver_at_ms <= now_ms() + 10_000  # RocketMQ retry 1: 10 s
    assert raw_redis.xpending("calls", "workers")["pending"] == 0  # acked in the same transaction


def test_retry_later_with_an_explicit_delay_or_level(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.hset(keys.CONFIG, "horizon_ms", 5_000)
    sink(
        redis_url,
        delivered(new_message_id(now_ms()), topic="calls"),
        delivered(new_message_id(now_ms()), topic="calls"),
    )
    deliveries = client.consume("calls", "w", block_ms=100)
    first, second = next(deliveries), next(deliveries)
    start = now_ms()
    first.retry_later(delay=500)
    second.retry_later(level=5)
    [(_, soon_ms)] = raw_redis.zrange(keys.OUTBOX, 0, -1, withscores=True)
    assert 500 <= soon_ms - start < 1_500
    [later] = inbound(raw_redis)
    assert 60_000 <= int(later[b"deliver_at_ms"]) - start < 61_000
    sink(redis_url, delivered(new_message_id(now_ms()), topic="calls"))
    third = next(deliveries)
    with pytest.raises(ValidationError, match="only one of level or delay"):
        third.retry_later(level=1, delay=1)


def test_retries_used_up_go_to_the_dlq(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    sink(redis_url, delivered(new_message_id(now_ms()), topic="calls", attempt=3))
    policy = RetryPolicy([100, 100])  # attempt 3 is the second retry: none left
    delivery = next(client.consume("calls", "w", block_ms=100, retry_policy=policy))
    assert delivery.retry_later() is False
    [(_, dead)] = raw_redis.xrange("calls.DLQ")
    assert dead[b"reason"] == b"no retries left after 2"
    assert dead[b"attempt"] == b"3"
    assert raw_redis.exists(keys.INBOUND) == 0
    assert raw_redis.xpending("calls", "w")["pending"] == 0


def test_dead_letter_keeps_the_message_and_the_reason(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    message_id = new_message_id(now_ms())
    sink(redis_url, delivered(message_id, topic="calls", body=b"poison"))
    next(client.consume("calls", "w", block_ms=100)).dead_letter("cannot parse body")
    [(_, dead)] = raw_redis.xrange("calls.DLQ")
    assert (dead[b"id"], dead[b"body"], dead[b"reason"], dead[b"group"]) == (
        message_id.encode(),
        b"poison",
        b"cannot parse body",
        b"w",
    )


def test_a_crashed_consumers_entries_are_reclaimed(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    ids = [new_message_id(now_ms()) for _ in range(3)]
    sink(redis_url, *(delivered(i, topic="jobs") for i in ids))
    # Consumer A reads the batch and dies before acking anything.
    crashed = client.consume("jobs", "g", consumer="a", block_ms=100, batch=10)
    assert {next(crashed).id for _ in range(3)} == set(ids)
    assert raw_redis.xpending("jobs", "g")["consumers"] == [{"name": b"a", "pending": 3}]
    # Consumer B keeps trying to claim and gets them once they have been idle 200 ms.
    survivor = client.consume("jobs", "g", consumer="b", block_ms=100, claim_idle_ms=200)
    reclaimed = [next(survivor) for _ in range(3)]
    assert {d.id for d in reclaimed} == set(ids)
    for delivery in reclaimed:
        delivery.ack()
    assert raw_redis.xpending("jobs", "g")["pending"] == 0


def test_follow_sees_only_new_entries(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    sink(redis_url, delivered(new_message_id(now_ms()), topic="watch"))  # before: not shown
    fresh = new_message_id(now_ms())
    seen: list[str] = []

    def watch() -> None:
        seen.append(next(client.follow("watch", block_ms=5_000)).id)

    watcher = threading.Thread(target=watch)
    watcher.start()
    # "$" means "after whatever is last when XREAD starts": wait until it is blocked.
    wait_for(
        lambda: any(c["cmd"] == "xread" for c in raw_redis.client_list()),
        10,
        "the follower to block on XREAD",
        interval_s=0.01,
    )
    sink(redis_url, delivered(fresh, topic="watch"))
    watcher.join(10)
    assert seen == [fresh]


# -- asyncio -------------------------------------------------------------------------------------


def test_async_client_has_the_same_surface(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario() -> None:
        async with AsyncClient(redis_url) as sdk:
            pending = await sdk.send("t", b"x", delay=120_000)
            assert (await sdk.status(pending)).state == "pending"
            assert await sdk.cancel(pending) is True
            assert (await sdk.status(pending)).state == "cancelled"
            many = await sdk.send_many([{"topic": "t", "body": b"a"}, {"topic": "t", "body": b"b"}])
            assert len(many) == 2
            shipped = new_message_id(now_ms())
            sink(redis_url, delivered(shipped, topic="jobs"))
            deliveries = sdk.consume("jobs", "g", block_ms=100)
            delivery = await anext(deliveries)
            assert delivery.id == shipped
            assert await delivery.retry_later(delay=100) is True
            assert (await sdk.status(shipped)).state == "delivered"
            assert (await sdk.metrics()).stats["delivered"] == 1

    asyncio.run(scenario())
    assert raw_redis.xpending("jobs", "g")["pending"] == 0
    assert len(inbound(raw_redis)) == 1 + 1  # send, cancel
    assert raw_redis.zcard(keys.OUTBOX) == 2 + 1  # send_many and retry: within the horizon


def test_async_follow_sees_only_new_entries(redis_url: str, raw_redis: redis.Redis) -> None:
    sink(redis_url, delivered(new_message_id(now_ms()), topic="watch"))  # before: not shown
    fresh = new_message_id(now_ms())

    async def scenario() -> str:
        async with AsyncClient(redis_url) as sdk:
            follower = sdk.follow("watch", block_ms=5_000)
            first = asyncio.create_task(anext(follower))
            # "$" means "after whatever is last when XREAD starts": wait until it blocks.
            deadline = time.monotonic() + 10
            while not any(c["cmd"] == "xread" for c in raw_redis.client_list()):
                assert time.monotonic() < deadline, "the follower never blocked on XREAD"
                await asyncio.sleep(0.01)
            sink(redis_url, delivered(fresh, topic="watch"))
            return (await asyncio.wait_for(first, 10)).id

    assert asyncio.run(scenario()) == fresh


def test_a_consumer_waits_longer_than_redis_pys_default_read_timeout(redis_url: str) -> None:
    # redis-py 8 gives up on a reply after 5 s unless told otherwise: a
    # consumer blocked on an idle topic for longer must keep waiting, not take
    # it for Redis being away (no patience: that would retry the read).
    client = Client(redis_url, patience_ms=0)
    shipped = {topic: new_message_id(now_ms()) for topic in ("idle", "idle-async")}
    seen: dict[str, str] = {}

    def consume() -> None:
        seen["idle"] = next(client.consume("idle", "g", block_ms=9_000)).id

    async def consume_async() -> None:
        async with AsyncClient(redis_url, patience_ms=0) as sdk:
            seen["idle-async"] = (await anext(sdk.consume("idle-async", "g", block_ms=9_000))).id

    def ship() -> None:
        for topic, message_id in shipped.items():
            sink(redis_url, delivered(message_id, topic=topic))

    timer = threading.Timer(6.0, ship)
    waiter = threading.Thread(target=consume)
    timer.start()
    waiter.start()
    try:
        asyncio.run(consume_async())
        waiter.join(10)
    finally:
        timer.cancel()
        client.close()
    assert seen == shipped
