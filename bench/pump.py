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

``pump_without`` says what each part of a delivery costs: the pump's script is
timed whole ("nothing") and with one part taken out at a time (the journal, the
``XADD``, the lateness count, all of the delivery, the read as well), on half
the messages each, from an empty server.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, cast

import redis

from bench.redis_load import redis_cpu_s
from bench.systems.zset import MOVE_DUE
from delayline import Client
from delayline.redis import keys, scripts
from delayline.redis.embedded import EmbeddedRedis
from delayline.redis.inbound import StreamEntry
from delayline.redis.store import DeliveryStore
from delayline.scheduler.pump import PUMP_BATCH
from delayline.timing import HORIZON_MS, now_ms

TOPIC = "bench.pump"


def main(messages: int, port: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        server = EmbeddedRedis(Path(scratch), port)
        server.start()
        try:
            result = {
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
            # Last: each variant starts from an empty server.
            return result | {"pump_without": _breakdown(server.url, messages // 2)}
        finally:
            server.stop()


#: The pump's script with one part taken out: (name, text in PUMP, replacement).
#: Each is timed like the whole; the difference is what that part costs Redis.
PUMP_PARTS = (
    ("journal", "if journal_put(journal, id, now) ~= 1 then", "if false then"),
    (
        "xadd",
        "local added = add_entry(redis.pcall, topic, id, body, key, headers, due, attempt)",
        "local added = 1",
    ),
    ("lateness count", "for _, bound in ipairs(bounds) do", "for _, bound in ipairs({}) do"),
    (
        "delivery (read and remove only)",
        "deliver_or_hold(id, tonumber(taken[2 * i]), outbox_decode(id, entries[i]))",
        "outbox_decode(id, entries[i])",
    ),
    (
        "read (remove only)",
        "deliver_or_hold(id, tonumber(taken[2 * i]), outbox_decode(id, entries[i]))",
        "",
    ),
)


def _breakdown(url: str, messages: int) -> dict[str, float]:
    """Redis µs per message of the pump whole ("nothing"), and with each of
    PUMP_PARTS taken out, all timed the same way."""
    result = {}
    for name, part, replacement in (("nothing", "", ""), *PUMP_PARTS):
        if part not in scripts.PUMP.text:
            raise AssertionError(f"the pump script has no {name!r} part any more: {part!r}")
        redis.Redis.from_url(url).flushall()
        script = scripts.PUMP.text.replace(part, replacement)
        result[name] = _pump(url, messages, script)["redis_us_per_message"]
    return result


def _pump(url: str, messages: int, script: str | None = None) -> dict[str, float]:
    """Fill the outbox, wait until it is due, and drain it with the pump (or ``script``)."""
    # Within the horizon (the outbox), and after the fill (about 30,000 msg/s).
    due_ms = now_ms() + (30_000 if script is None else 2_000 + messages // 20)
    with Client(url) as client:
        for first in range(0, messages, 1_000):
            count = min(1_000, messages - first)
            client.send_many([{"topic": TOPIC, "body": b"x" * 64, "deliver_at": due_ms}] * count)
    raw = redis.Redis.from_url(url)
    assert raw.zcard(keys.OUTBOX) == messages
    while now_ms() <= due_ms:
        time.sleep(0.05)
    store = DeliveryStore.from_url(url)
    variant = raw.register_script(script) if script is not None else None
    cpu_s = redis_cpu_s(raw)
    calls, started = 0, time.perf_counter()
    while (
        variant(keys=scripts.PUMP.keys(keys.UNSHARDED), args=[PUMP_BATCH, 3600, HORIZON_MS])[0]
        if variant is not None
        else store.pump(PUMP_BATCH, 3600).moved
    ):
        calls += 1
    elapsed_s = time.perf_counter() - started
    assert raw.zcard(keys.OUTBOX) == 0
    if variant is None:
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
        [(_, entries)] = cast(
            list[tuple[bytes, list[StreamEntry]]],
            raw.xreadgroup("bench", "c1", {TOPIC: ">"}, count=PUMP_BATCH),
        )
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


def _us_per_message(raw: redis.Redis, since_cpu_s: float, messages: int) -> float:
    return round((redis_cpu_s(raw) - since_cpu_s) * 1e6 / messages, 2)
