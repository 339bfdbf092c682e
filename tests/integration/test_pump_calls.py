"""One pump call against a real server: what it asks Redis for a call's messages, and
each outcome of a call that mixes them (delivered, journalled already, cancelled,
rejected)."""

from __future__ import annotations

from typing import Any

import redis

from delayline import Client
from delayline.redis import keys
from delayline.redis.lua_source import CANCELLED_MARK
from delayline.redis.store import DeliveryStore
from delayline.testing import wait_for
from delayline.timing import now_ms

#: Commands a call might send per message; the test counts each.
COUNTED = ("hget", "hsetnx", "hmget", "hset", "xadd")


def calls(raw: redis.Redis) -> dict[str, int]:
    """How many times Redis has run each of COUNTED, scripts' calls included."""
    stats: dict[str, Any] = raw.info("commandstats")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in COUNTED}


def send_due_soon(url: str, topics: list[str]) -> tuple[list[str], int]:
    """One message per topic, all due at the same ms, half a second away; and that ms."""
    due_ms = now_ms() + 500
    with Client(url) as client:
        sent = client.send_many([{"topic": t, "body": b"x", "deliver_at": due_ms} for t in topics])
    return sent, due_ms


def pump_once_due(url: str, due_ms: int) -> int:
    """Wait until ``due_ms`` has passed, then pump once; returns how many it moved."""
    wait_for(lambda: now_ms() > due_ms, 5, "the messages to be due", interval_s=0.01)
    return DeliveryStore.from_url(url).pump(1_000, 60).moved


def test_a_call_reads_and_journals_its_messages_with_one_command_each(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    sent, due_ms = send_due_soon(redis_url, ["orders"] * 300)
    before = calls(raw_redis)
    assert pump_once_due(redis_url, due_ms) == 300
    after = calls(raw_redis)
    # The entries and the journal are read with one HMGET each, and the journal
    # written with one HSET; the topic's delivery limit and its group's are looked
    # up once, together (a third HMGET); only the topic entries take a command each.
    assert {name: after[name] - before[name] for name in COUNTED} == {
        "hget": 0,
        "hsetnx": 0,
        "hmget": 3,
        "hset": 1,
        "xadd": 300,
    }
    # Due at the same ms, they go in id order (the outbox sorts ties by member).
    assert [f[b"id"].decode() for _, f in raw_redis.xrange("orders")] == sorted(sent)
    journal = raw_redis.hgetall(keys.journal(due_ms))
    assert sorted(journal) == sorted(i.encode() for i in sent)


def test_one_call_delivers_skips_drops_and_rejects_each_message_once(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.set("poisoned", "not a stream")
    sent, due_ms = send_due_soon(redis_url, ["orders", "orders", "orders", "poisoned", "orders"])
    fresh, journalled, cancelled, rejected, last = sent
    journal = keys.journal(due_ms)
    raw_redis.hset(journal, journalled, "1")  # as if a replay had delivered it already
    with Client(redis_url) as client:
        assert client.cancel(cancelled)
    assert pump_once_due(redis_url, due_ms) == 5
    assert [f[b"id"].decode() for _, f in raw_redis.xrange("orders")] == sorted([fresh, last])
    stats = {k.decode(): int(v) for k, v in raw_redis.hgetall(keys.STATS).items()}
    assert {k: stats.get(k, 0) for k in ("delivered", "duplicates", "dropped", "rejected")} == {
        "delivered": 2,
        "duplicates": 1,
        "dropped": 1,
        "rejected": 1,
    }
    assert raw_redis.hget(journal, journalled) == b"1"
    assert raw_redis.hget(journal, cancelled) == CANCELLED_MARK
    # Not delivered, so the journal must not say it was; its reject says why.
    assert raw_redis.hget(journal, rejected) is None
    assert raw_redis.hget(keys.rejected(due_ms), rejected) is not None
    for delivered in (fresh, last):
        assert int(raw_redis.hget(journal, delivered) or 0) >= due_ms
    assert raw_redis.ttl(journal) > 0
    assert raw_redis.zcard(keys.OUTBOX) == raw_redis.hlen(keys.OUTBOX_DATA) == 0


def test_more_due_than_a_call_takes_go_evenly_over_the_calls_they_need(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    # 250 due at one ms with at most 100 a call: three calls, of 84, 83 and 83
    # (not 100, 100 and 50), so that the second call starts a third of the way in.
    sent, due_ms = send_due_soon(redis_url, ["orders"] * 250)
    wait_for(lambda: now_ms() > due_ms, 5, "the messages to be due", interval_s=0.01)
    store = DeliveryStore.from_url(redis_url)
    assert [store.pump(100, 60).moved for _ in range(4)] == [84, 83, 83, 0]
    assert sorted(f[b"id"].decode() for _, f in raw_redis.xrange("orders")) == sorted(sent)
    # At most the cap still: a call never takes more than it is given.
    sent, due_ms = send_due_soon(redis_url, ["orders"] * 100)
    wait_for(lambda: now_ms() > due_ms, 5, "the messages to be due", interval_s=0.01)
    assert [store.pump(100, 60).moved for _ in range(2)] == [100, 0]


def test_a_herd_goes_in_one_round_trip_of_the_calls_it_needs(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    sent, due_ms = send_due_soon(redis_url, ["orders"] * 250)
    store = DeliveryStore.from_url(redis_url)
    # Before it is due, a call says how many are due when, to Redis's µs: from a
    # clock read after this one's, not from its whole ms, which is up to 1 ms more.
    store.pump(100, 60)  # the connection made and the script loaded: timed below, a call
    for _ in range(5):
        before_ms = raw_redis_ms(raw_redis)
        ahead = store.pump(100, 60)
        after_ms = raw_redis_ms(raw_redis)
        assert (ahead.moved, ahead.next_due_ms, ahead.due_by_next) == (0, due_ms, 250)
        assert ahead.due_in_ms is not None
        assert due_ms - after_ms <= ahead.due_in_ms <= due_ms - before_ms
    wait_for(lambda: now_ms() > due_ms, 5, "the messages to be due", interval_s=0.01)
    scripts_before = int(raw_redis.info("commandstats")["cmdstat_evalsha"]["calls"])
    # Three calls sent together: 84, 83 and 83 (each splits what is due in its turn).
    result = store.pump(100, 60, calls=3)
    assert int(raw_redis.info("commandstats")["cmdstat_evalsha"]["calls"]) - scripts_before == 3
    assert (result.moved, result.next_due_ms, result.due_in_ms) == (250, None, None)
    assert sorted(f[b"id"].decode() for _, f in raw_redis.xrange("orders")) == sorted(sent)
    # More calls than are needed move nothing more, and deliver nothing twice.
    assert store.pump(100, 60, calls=2).moved == 0
    assert raw_redis.xlen("orders") == 250


def raw_redis_ms(raw: redis.Redis) -> float:
    """Redis's clock now, in ms with its µs."""
    seconds, micros = raw.time()
    return seconds * 1000 + micros / 1000
