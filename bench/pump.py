"""How fast the pump drains due messages, against the zset baseline's bare move.

Fills the outbox of an embedded Redis with ``messages`` due at once (through the
SDK's near path), waits until they are due, then times the pump's Lua calls
until the outbox is empty: each message is read, checked for a cancel,
journaled, XADDed to its topic and counted. The same count is then moved the
zset baseline's way (ZRANGEBYSCORE, ZREM, RPUSH of bare ids). No consumer runs.

``redis_us_per_message`` is the CPU time of Redis's main thread per message
(``INFO cpu``: commands, protocol and the AOF buffer), which bounds a burst:
Redis runs one command at a time, so a burst of N messages due in one second
needs N times the pump's and the consumer's cost of Redis's one core in that
second. It is given for the pump, for a plain consumer's ``XREADGROUP`` and
``XACK`` of the delivered entries, for the bare ``XADD`` of such an entry (the
floor of any delivery to a stream), and for the zset move.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.systems.zset import MOVE_DUE
from delayline import Client
from delayline.scheduler.pump import PUMP_BATCH
from delayline.timing import now_ms
from delayline.transports import keys
from delayline.transports.embedded import EmbeddedRedis
from delayline.transports.redis_streams import RedisStreams

TOPIC = "bench.pump"


def main(messages: int, port: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        server = EmbeddedRedis(Path(scratch), port)
        server.start()
        try:
            return {
                "benchmark": "pump",
                "messages": messages,
                "pump_batch": PUMP_BATCH,
                "pump": _pump(server.url, messages),
                "zset_move": _zset_move(server.url, messages),
                "redis_us_per_message": {
                    "consumer": _consume(server.url, messages),
                    "xadd_alone": _xadd_alone(server.url, messages),
                },
            }
        finally:
            server.stop()


def _pump(url: str, messages: int) -> dict[str, float]:
    due_ms = now_ms() + 30_000  # within the horizon: the outbox
    with Client(url) as client:
        for first in range(0, messages, 1_000):
            count = min(1_000, messages - first)
            client.send_many([{"topic": TOPIC, "body": b"x" * 64, "deliver_at": due_ms}] * count)
    raw = redis.Redis.from_url(url)
    assert raw.zcard(keys.OUTBOX) == messages
    while now_ms() <= due_ms:
        time.sleep(0.05)
    streams = RedisStreams.from_url(url)
    cpu_s = redis_cpu_s(raw)
    calls, started = 0, time.perf_counter()
    while streams.pump(PUMP_BATCH, 3600).moved:
        calls += 1
    elapsed_s = time.perf_counter() - started
    assert raw.xlen(TOPIC) == messages
    return {
        "seconds": round(elapsed_s, 3),
        "messages_per_second": round(messages / elapsed_s),
        "ms_per_call": round(elapsed_s * 1000 / max(calls, 1), 2),
        "redis_us_per_message": _us_per_message(raw, cpu_s, messages),
    }


def _zset_move(url: str, messages: int) -> dict[str, float]:
    raw = redis.Redis.from_url(url)
    due_ms = now_ms()
    for first in range(0, messages, 10_000):
        raw.zadd("bench:zset:delayed", {f"job-{n}": due_ms for n in range(first, first + 10_000)})
    move = raw.register_script(MOVE_DUE)
    cpu_s = redis_cpu_s(raw)
    started = time.perf_counter()
    while move(keys=["bench:zset:delayed", "bench:zset:ready"], args=[now_ms(), PUMP_BATCH]):
        pass
    elapsed_s = time.perf_counter() - started
    return {
        "seconds": round(elapsed_s, 3),
        "messages_per_second": round(messages / elapsed_s),
        "redis_us_per_message": _us_per_message(raw, cpu_s, messages),
    }


def _consume(url: str, messages: int) -> float:
    """Redis's time per message for a plain consumer group reading the pump's topic."""
    raw = redis.Redis.from_url(url)
    raw.xgroup_create(TOPIC, "bench", id="0")
    cpu_s = redis_cpu_s(raw)
    read = 0
    while read < messages:
        [(_, entries)] = raw.xreadgroup("bench", "c1", {TOPIC: ">"}, count=PUMP_BATCH)
        raw.xack(TOPIC, "bench", *(entry_id for entry_id, _ in entries))
        read += len(entries)
    return _us_per_message(raw, cpu_s, messages)


#: One XADD of a delivery's fields per ARGV entry, and the same loop without it.
_XADD_LOOP = """
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'id', ARGV[i], 'body', KEYS[2], 'key', '', 'headers', '{}',
    'deliver_at_ms', '1790000000000', 'delivered_at_ms', '1790000000001', 'attempt', '1')
end
"""
_EMPTY_LOOP = "for i = 1, #ARGV do end"


def _xadd_alone(url: str, messages: int) -> float:
    """Redis's time for the bare XADD of one delivered entry (AOF on): a floor."""
    raw = redis.Redis.from_url(url)
    costs = []
    for script in (_XADD_LOOP, _EMPTY_LOOP):
        loop = raw.register_script(script)
        cpu_s = redis_cpu_s(raw)
        for first in range(0, messages, PUMP_BATCH):
            ids = [f"{n:026d}" for n in range(first, min(first + PUMP_BATCH, messages))]
            loop(keys=["bench.xadd", "x" * 64], args=ids)
        costs.append(_us_per_message(raw, cpu_s, messages))
    return round(costs[0] - costs[1], 2)


def redis_cpu_s(raw: redis.Redis) -> float:
    """CPU seconds Redis's main thread has used: commands, protocol, AOF buffer."""
    cpu = raw.info("cpu")
    return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])


def _us_per_message(raw: redis.Redis, since_cpu_s: float, messages: int) -> float:
    return round((redis_cpu_s(raw) - since_cpu_s) * 1e6 / messages, 2)
