"""How fast the pump drains due messages, against the zset baseline's bare move.

Fills the outbox of an embedded Redis with ``messages`` due at once (through the
SDK's near path), waits until they are due, then times the pump's Lua calls
until the outbox is empty: each message is read, checked for a cancel,
journaled, XADDed to its topic and counted. The same count is then moved the
zset baseline's way (ZRANGEBYSCORE, ZREM, RPUSH of bare ids). No consumer runs.
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
            }
        finally:
            server.stop()


def _pump(url: str, messages: int) -> dict[str, float]:
    due_ms = now_ms() + 30_000  # within the horizon: the outbox
    with Client(url) as client:
        for first in range(0, messages, 1_000):
            count = min(1_000, messages - first)
            client.send_many(
                [{"topic": "bench.pump", "body": b"x" * 64, "deliver_at": due_ms}] * count
            )
    raw = redis.Redis.from_url(url)
    assert raw.zcard(keys.OUTBOX) == messages
    while now_ms() <= due_ms:
        time.sleep(0.05)
    streams = RedisStreams.from_url(url)
    calls, started = 0, time.perf_counter()
    while streams.pump(PUMP_BATCH, 3600).moved:
        calls += 1
    elapsed_s = time.perf_counter() - started
    assert raw.xlen("bench.pump") == messages
    return {
        "seconds": round(elapsed_s, 3),
        "messages_per_second": round(messages / elapsed_s),
        "ms_per_call": round(elapsed_s * 1000 / max(calls, 1), 2),
    }


def _zset_move(url: str, messages: int) -> dict[str, float]:
    raw = redis.Redis.from_url(url)
    due_ms = now_ms()
    for first in range(0, messages, 10_000):
        raw.zadd("bench:zset:delayed", {f"job-{n}": due_ms for n in range(first, first + 10_000)})
    move = raw.register_script(MOVE_DUE)
    started = time.perf_counter()
    while move(keys=["bench:zset:delayed", "bench:zset:ready"], args=[now_ms(), PUMP_BATCH]):
        pass
    elapsed_s = time.perf_counter() - started
    return {"seconds": round(elapsed_s, 3), "messages_per_second": round(messages / elapsed_s)}
