"""The contract between Python and the Lua scripts on a real Redis: how every script is
called (EVALSHA, loaded when Redis answers NOSCRIPT), and the near rule in Lua."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import closing

import pytest
import redis

from delayline import AsyncClient, Client
from delayline.errors import TransportError
from delayline.redis import keys, lua_source, scripts
from delayline.redis.connection import RedisConnection
from delayline.redis.store import DeliveryStore
from delayline.timing import is_near, now_ms


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


#: Two messages for the outbox and, between them, one for the inbound stream.
BATCH: list[dict[str, object]] = [
    {"topic": "t", "body": b"near", "delay": 1_000},
    {"topic": "t", "body": b"far", "delay": 3_600_000},
    {"topic": "t", "body": b"near too", "delay": 2_000},
]


def test_a_send_after_the_scripts_are_flushed_loads_them_and_writes_each_message_once(
    client: Client, raw_redis: redis.Redis
) -> None:
    raw_redis.script_flush()
    near, far, near_too = client.send_many(BATCH)
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [near.encode(), near_too.encode()]
    assert [fields[b"id"] for _, fields in raw_redis.xrange(keys.INBOUND)] == [far.encode()]
    assert raw_redis.script_exists(scripts.SEND_NEAR.sha) == [True]
    # Loaded now: the next send calls it by its sha alone.
    client.send("t", b"again", delay=1_000)
    assert raw_redis.zcard(keys.OUTBOX) == 3


def test_the_async_client_loads_a_flushed_script_alike(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def run() -> str:
        async with AsyncClient(redis_url) as sdk:
            raw_redis.script_flush()
            return await sdk.send("t", b"near", delay=1_000)

    sent = asyncio.run(run())
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [sent.encode()]


def test_the_scheduler_side_loads_a_flushed_script(redis_url: str, raw_redis: redis.Redis) -> None:
    raw_redis.script_flush()
    with closing(DeliveryStore.from_url(redis_url)) as store:
        assert store.pump(10, 60).moved == 0
    assert raw_redis.script_exists(scripts.PUMP.sha) == [True]


def test_a_script_error_other_than_noscript_is_raised_not_retried(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.set("delayline:outbox", "not a sorted set")
    command = scripts.LIST_OUTBOX.command(
        scripts.LIST_OUTBOX.keys(keys.UNSHARDED), ["-inf", "+inf", 0, 10, 10, "", ""]
    )
    with closing(RedisConnection.from_url(redis_url)) as connection:
        with pytest.raises(TransportError, match="WRONGTYPE"):
            connection.execute([command], action="list", transaction=False, errors_ok=False)
        [error] = connection.execute([command], action="list", transaction=False, errors_ok=True)
    assert isinstance(error, redis.ResponseError)


#: The horizon library, and a call of its rule with (due ms, now ms, horizon ms).
IS_NEAR = lua_source.load("horizon.lua") + (
    "return is_near(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])) and 1 or 0\n"
)


@pytest.mark.parametrize("horizon_ms", [0, 1, 30_000])
@pytest.mark.parametrize("offset_ms", [-5_000, -1, 0, 1])
def test_the_lua_near_rule_is_timing_is_near_at_the_boundary(
    raw_redis: redis.Redis, horizon_ms: int, offset_ms: int
) -> None:
    now = now_ms()
    due_ms = now + horizon_ms + offset_ms
    near = raw_redis.eval(IS_NEAR, 0, due_ms, now, horizon_ms)
    assert bool(near) == is_near(due_ms, now, horizon_ms), (due_ms, now, horizon_ms)
