"""A workload's Redis cost is read from a real server's counters."""

from __future__ import annotations

import redis
from bench import redis_load

from delayline.redis import keys


def test_cost_counts_the_commands_run_between_snapshots(raw_redis: redis.Redis[bytes]) -> None:
    before = redis_load.snapshot(raw_redis)
    for n in range(300):
        raw_redis.xadd("bench:load", {"n": str(n)})
    # Work enough to take Redis's thread well past the 10 ms that main_cpu_s is rounded
    # to, on a fast day too (200 HSETs with the XADDs rounded to 0.0 once).
    hsets = 100_000
    raw_redis.eval("for i = 1, ARGV[1] do redis.call('HSET', KEYS[1], i, i) end", 1, "bench:h",
                   hsets)  # fmt: skip
    cost = redis_load.cost(before, redis_load.snapshot(raw_redis), messages=300)

    assert cost is not None
    assert cost["top_commands"]["xadd"]["calls"] == 300
    assert cost["top_commands"]["hset"]["calls"] == hsets  # inside the script, counted too
    assert cost["main_cpu_s"] >= 0.01
    # main_cpu_s is rounded to 10 ms: the two agree within that.
    assert abs(cost["main_us_per_message"] - cost["main_cpu_s"] * 1e6 / 300) <= 0.005e6 / 300
    assert cost["used_memory_mb"] <= cost["rss_mb"] + 1
    assert cost["lua_memory_mb"] == round(raw_redis.info("memory")["used_memory_lua"] / 2**20, 1)
    assert len(cost["top_commands"]) <= redis_load.TOP_COMMANDS
    assert cost["service_lateness"]["delivered"] == 0


def test_cost_reads_the_lateness_added_meanwhile(raw_redis: redis.Redis[bytes]) -> None:
    raw_redis.hset(keys.LATENESS, mapping={"1": 50, "+Inf": 1})
    before = redis_load.snapshot(raw_redis)
    raw_redis.hincrby(keys.LATENESS, "1", 98)
    raw_redis.hincrby(keys.LATENESS, "50", 2)
    cost = redis_load.cost(before, redis_load.snapshot(raw_redis), messages=100)

    assert cost is not None
    assert cost["service_lateness"] == {"delivered": 100, "p50_ms_at_most": 1.0,
                                        "p99_ms_at_most": 50.0}  # fmt: skip


def test_cost_is_none_across_a_server_restart(raw_redis: redis.Redis[bytes]) -> None:
    before = redis_load.snapshot(raw_redis)
    after = dict(redis_load.snapshot(raw_redis), run_id="another server")

    assert redis_load.cost(before, after, messages=1) is None
