"""The pump thread against a real Redis: it blocks when idle, and the bell wakes it."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from delayline import Client
from delayline.errors import ConfigurationError
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.scheduler.pump import Pump
from delayline.testing import wait_for


def script_calls(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))


def test_an_idle_pump_blocks_instead_of_polling(pump: Pump, raw_redis: redis.Redis) -> None:
    wait_for(lambda: script_calls(raw_redis) > 0, 10, "the pump's first call", interval_s=0.01)
    before = script_calls(raw_redis)
    time.sleep(3)  # the quantity measured: calls made over an idle span
    # One call per nap of at most a second; a polling pump made hundreds.
    assert script_calls(raw_redis) - before <= 6


def test_the_bell_wakes_an_idle_pump_for_a_message_due_soon(
    pump: Pump, redis_url: str, raw_redis: redis.Redis
) -> None:
    wait_for(lambda: script_calls(raw_redis) > 0, 10, "the pump's first call", interval_s=0.01)
    sent = []
    with Client(redis_url) as client:
        for n in range(1, 4):
            time.sleep(0.3)  # into a nap on the bell, at another phase each time
            sent.append(client.send("soon", b"x", delay=100))
            wait_for(lambda n=n: raw_redis.xlen("soon") == n, 5, "the delivery", interval_s=0.01)
    entries = [fields for _, fields in raw_redis.xrange("soon")]
    assert [fields[b"id"].decode() for fields in entries] == sent
    for fields in entries:
        late_ms = int(fields[b"delivered_at_ms"]) - int(fields[b"deliver_at_ms"])
        # Never early; and not a nap late: a pump that waited out its nap of up to
        # 1 s would be 300 ms late or more two times in three.
        assert 0 <= late_ms < 300


@pytest.mark.parametrize("timeout_s", [0.0004, 0.001, 0.0015])
def test_a_nap_shorter_than_redis_counts_still_ends(
    timeout_s: float, redis_url: str, raw_redis: redis.Redis
) -> None:
    # Redis truncates a blocking timeout to whole ms, and 0 means for ever: the
    # pump, napping (gap - 200 ms) before an entry due 201 ms ahead, would have
    # slept through it and every later one until the bell rang again.
    store = DeliveryStore.from_url(redis_url, patience_ms=0)
    napper = threading.Thread(target=store.wait_for_bell, args=(timeout_s,), daemon=True)
    napper.start()
    napper.join(2)
    blocked = napper.is_alive()
    if blocked:
        raw_redis.lpush(keys.OUTBOX_BELL, 1)  # free the thread, whatever the verdict
        napper.join(2)
    store.close()
    assert not blocked, f"wait_for_bell({timeout_s}) still blocked after 2 s"


def test_a_pump_whose_preparation_refuses_stops_and_says_why(redis_url: str) -> None:
    def refuse() -> None:
        raise ConfigurationError("no such thing")

    refused = Pump(redis_url, journal_ttl_s=3600, prepare=refuse)
    refused.start()
    wait_for(lambda: not refused.alive, 10, "the pump to stop")
    assert isinstance(refused.failure, ConfigurationError)
    assert "no such thing" in str(refused.failure)
