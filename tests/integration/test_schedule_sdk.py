"""The SDK's recurring schedules against a real Redis: put, pause, resume and delete each
write one ``op=schedule`` record to the schedule's shard's inbound stream, which
decodes back to what was asked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from delayline import AsyncClient, Client
from delayline.errors import ValidationError
from delayline.plans.scheduling import inbound_of
from delayline.redis import keys
from delayline.schedules import ops
from delayline.schedules.recurrence import Every
from delayline.schedules.spec import ALL, Schedule
from delayline.timing import now_ms
from delayline.validation import Limits


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


def records(raw: redis.Redis, stream: str) -> list[ops.ScheduleOp]:
    """Every record of ``stream``, decoded as the scheduler will."""
    return [
        ops.decode_op(fields, sent_at_ms=int(fields[b"sent_at_ms"]), limits=Limits())
        for _, fields in raw.xrange(stream)
    ]


def streams_written(raw: redis.Redis) -> set[str]:
    return {name.decode() for name in raw.scan_iter(match="delayline:inbound*")}


def test_each_method_writes_one_record_that_reads_back(
    client: Client, raw_redis: redis.Redis
) -> None:
    before = now_ms()
    definition = client.schedule(
        "nightly",
        "reports",
        "run",
        cron="0 2 * * *",
        tz="Europe/Paris",
        start=datetime(2026, 1, 1, tzinfo=UTC),
        catch_up=ALL,
        catch_up_window=timedelta(hours=6),
        key="k",
        headers={"team": "data"},
    )
    assert isinstance(definition, Schedule)
    client.pause("nightly", "reports")
    client.resume("nightly", "reports")
    client.delete_schedule("nightly", "reports")

    assert streams_written(raw_redis) == {keys.INBOUND}  # no scheduler has published shards
    put, pause, resume, delete = records(raw_redis, keys.INBOUND)
    assert put == ops.ScheduleOp(ops.PUT, "reports", "nightly", put.sent_at_ms, definition)
    assert before <= put.sent_at_ms <= now_ms()
    assert [op.action for op in (pause, resume, delete)] == [ops.PAUSE, ops.RESUME, ops.DELETE]
    assert {(op.topic, op.name, op.definition) for op in (pause, resume, delete)} == {
        ("reports", "nightly", None)
    }


def test_a_bad_definition_writes_nothing(client: Client, raw_redis: redis.Redis) -> None:
    with pytest.raises(ValidationError) as caught:
        client.schedule("n", "reports", b"x", cron="0 9 * * *", every="1h")
    assert (caught.value.field, caught.value.rule) == ("recurrence", "one_of")
    with pytest.raises(ValidationError):
        client.pause("not a name", "reports")
    assert streams_written(raw_redis) == set()


def test_the_async_client_writes_the_same_records(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario() -> Schedule:
        async with AsyncClient(redis_url) as sdk:
            definition = await sdk.schedule("tick", "jobs", b"\x00", every="15m", max_runs=3)
            await sdk.pause("tick", "jobs")
            await sdk.resume("tick", "jobs")
            await sdk.delete_schedule("tick", "jobs")
            return definition

    definition = asyncio.run(scenario())
    put, *changes = records(raw_redis, keys.INBOUND)
    assert put.definition == definition
    assert definition.recurrence == Every(900_000)
    assert [(op.action, op.topic, op.name) for op in changes] == [
        (action, "jobs", "tick") for action in (ops.PAUSE, ops.RESUME, ops.DELETE)
    ]


def test_with_published_shards_a_schedule_keeps_to_its_own(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.hset(keys.CONFIG, mapping={"inbound_shards": 3, "horizon_ms": 60_000})
    names = [f"s{n}" for n in range(12)]
    with Client(redis_url) as client:  # a new client reads the count afresh
        for name in names:
            client.schedule(name, "t", b"", every="1m")
            client.pause(name, "t")
            client.resume(name, "t")
            client.delete_schedule(name, "t")

    assert raw_redis.xlen(keys.INBOUND) == 0
    by_stream = {shard: records(raw_redis, keys.inbound_shard(shard)) for shard in range(3)}
    for shard, found in by_stream.items():
        for op in found:
            assert inbound_of("t", op.name, 3) == keys.inbound_shard(shard)
            assert ops.shard_of("t", op.name, 3) == shard
    for name in names:
        mine = [op.action for ops_ in by_stream.values() for op in ops_ if op.name == name]
        assert mine == [ops.PUT, ops.PAUSE, ops.RESUME, ops.DELETE]  # one stream, in order
    assert all(by_stream.values())  # 12 schedules reach all three shards
