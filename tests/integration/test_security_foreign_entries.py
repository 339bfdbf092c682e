"""Another writer's entry in a topic stream stops no consumer: a group's consumer
dead-letters it with the reason and goes on, a watcher skips it, and `delayline tail`
prints no traceback."""

from __future__ import annotations

import asyncio

import redis
from click.testing import CliRunner

from delayline import AsyncClient, Client
from delayline.cli import main
from delayline.ids import new_message_id
from delayline.plans.consuming import Entry, watchable
from delayline.timing import now_ms
from delayline.validation import Limits

FOREIGN = {b"id": b"order-42", b"deliver_at_ms": b"notanumber", b"body": b"x"}


def delivery(body: bytes) -> dict[bytes, bytes]:
    """An entry as the scheduler writes it (tests/integration/test_redis_store.py)."""
    due_ms = now_ms() - 1_000
    return {
        b"id": new_message_id(due_ms).encode(),
        b"body": body,
        b"deliver_at_ms": str(due_ms).encode(),
        b"delivered_at_ms": str(due_ms + 3).encode(),
        b"attempt": b"1",
        b"headers": b"{}",
    }


def test_a_consumer_dead_letters_a_foreign_entry_and_goes_on(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.xadd("orders", FOREIGN)
    raw_redis.xadd("orders", {**delivery(b"ok"), b"attempt": b"zero"})
    raw_redis.xadd("orders", delivery(b"good"))
    with Client(redis_url) as client:
        first = next(client.consume("orders", "billing", block_ms=100))
        assert first.body == b"good"
        first.ack()
    assert raw_redis.xpending("orders", "billing")["pending"] == 0
    dead = [fields for _, fields in raw_redis.xrange("orders.DLQ")]
    assert [fields[b"reason"].decode() for fields in dead] == [
        "not a delayline delivery: id b'order-42' is not a message id",
        "not a delayline delivery: attempt b'zero' is not a number from 1",
    ]
    assert dead[0][b"deliver_at_ms"] == b"notanumber"  # kept as it came


def test_the_async_consumer_does_the_same(redis_url: str, raw_redis: redis.Redis) -> None:
    raw_redis.xadd("orders", {**delivery(b"x"), b"deliver_at_ms": b"notanumber"})
    raw_redis.xadd("orders", delivery(b"good"))

    async def first_body() -> bytes:
        async with AsyncClient(redis_url) as client:
            async for each in client.consume("orders", "billing", block_ms=100):
                await each.ack()
                return each.body
        raise AssertionError("no delivery")

    assert asyncio.run(first_body()) == b"good"
    [(_, dead)] = raw_redis.xrange("orders.DLQ")
    assert (
        dead[b"reason"]
        == b"not a delayline delivery: deliver_at_ms b'notanumber' is not a number from 0"
    )


def test_tail_skips_or_dead_letters_a_foreign_entry_without_a_traceback(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.xadd("orders", FOREIGN)
    raw_redis.xadd("orders", delivery(b"good"))
    result = CliRunner().invoke(
        main,
        ["tail", "orders", "--group", "ops", "--count", "1"],
        env={"DELAYLINE_REDIS_URL": redis_url},
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert raw_redis.xlen("orders.DLQ") == 1
    assert raw_redis.xpending("orders", "ops")["pending"] == 0


def test_a_watcher_leaves_a_foreign_entry_out() -> None:
    entries = [Entry("orders", "", "1-0", FOREIGN), Entry("orders", "", "2-0", delivery(b"ok"))]
    assert [entry.entry_id for entry in watchable(entries, Limits())] == ["2-0"]
