"""What a workload cost the system's Redis server: the bound of a one-Redis system.

Redis runs commands on one thread, so the CPU time of its main thread per
message (``INFO cpu``) caps the rate one server can carry: at most
1,000,000 / (µs per message) messages a second, before anything else runs.
A snapshot is taken before and after each workload; the difference also names
the commands that took the time (``INFO commandstats``; the commands a Lua
script runs are counted both on their own and in the script's call), the forks
for AOF rewrites (each stops the main thread for ``latest_fork_usec``), and
how much of the server's resident memory holds data (``used_memory``) rather
than memory its allocator has kept after freeing it. For delayline it also
reads the scheduler's own lateness histogram (``delayline:lateness``, stamped
by Redis's clock as each message is written to its topic): the lateness a
message has before any consumer runs.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import redis

from delayline import metrics
from delayline.redis import keys

#: Commands kept in a result, the costliest first.
TOP_COMMANDS = 8


def redis_cpu_s(client: redis.Redis) -> float:
    """CPU seconds Redis's main thread has used: commands, protocol, AOF buffer."""
    return _main_thread_s(client.info("cpu"))


def _main_thread_s(info: dict[str, Any]) -> float:
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


class BusyWindow:
    """How busy Redis's main thread is from ``start_ms`` (epoch ms) for ``span_ms``:
    its CPU seconds per wall second, read from a thread of this process.

    A fraction near 1 means every command waits for the one before it: a
    consumer's read queues behind the pump's calls, whatever the rest does.
    A context manager; ``fraction`` is None until the window has passed.
    """

    def __init__(self, url: str, start_ms: int, span_ms: int) -> None:
        self.fraction: float | None = None
        self._client = redis.Redis.from_url(url)
        self._start_ms = start_ms
        self._span_ms = span_ms
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BusyWindow:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.join()
        self._client.close()

    def _run(self) -> None:
        time.sleep(max(0.0, self._start_ms / 1000 - time.time()))
        cpu_s, began = redis_cpu_s(self._client), time.monotonic()
        time.sleep(self._span_ms / 1000)
        used_s = redis_cpu_s(self._client) - cpu_s
        self.fraction = round(used_s / (time.monotonic() - began), 3)


def snapshot(client: redis.Redis) -> dict[str, Any]:
    """The counters a workload's cost is the difference of."""
    info = client.info("all")
    return {
        "cpu_main_s": _main_thread_s(info),
        "commands": {
            name.removeprefix("cmdstat_"): (int(stats["calls"]), int(stats["usec"]))
            for name, stats in info.items()
            if name.startswith("cmdstat_") and isinstance(stats, dict)
        },
        "forks": int(info["total_forks"]),
        "latest_fork_usec": int(info["latest_fork_usec"]),
        "used_memory": int(info["used_memory"]),
        "rss": int(info["used_memory_rss"]),
        # Scripts' heap: not part of used_memory, but of the resident memory.
        "lua": int(info["used_memory_lua"]),
        "allocator": str(info["mem_allocator"]),
        "run_id": str(info["run_id"]),
        "lateness": lateness_counts(client),
    }


def lateness_counts(client: redis.Redis) -> dict[str, int]:
    """delayline's lateness histogram, every Redis shard's added up."""
    shards = int(client.hget(keys.CONFIG, "inbound_shards") or 1)
    counts: dict[str, int] = {}
    for shard in keys.read_layout(shards):
        for label, count in cast(dict[bytes, bytes], client.hgetall(shard.lateness)).items():
            counts[label.decode()] = counts.get(label.decode(), 0) + int(count)
    return counts


def cost(before: dict[str, Any], after: dict[str, Any], messages: int) -> dict[str, Any] | None:
    """The Redis cost between two snapshots; None if the server restarted between them."""
    if before["run_id"] != after["run_id"]:
        return None
    cpu_s = after["cpu_main_s"] - before["cpu_main_s"]
    commands = {
        name: (calls - before["commands"].get(name, (0, 0))[0],
               usec - before["commands"].get(name, (0, 0))[1])
        for name, (calls, usec) in after["commands"].items()
    }  # fmt: skip
    top = sorted(commands.items(), key=lambda item: -item[1][1])[:TOP_COMMANDS]
    lateness = metrics.diff_histogram(after["lateness"], before["lateness"])
    return {
        "main_cpu_s": round(cpu_s, 2),
        "main_us_per_message": round(cpu_s * 1e6 / messages, 1) if messages else None,
        "top_commands": {name: {"calls": calls, "ms": usec // 1000} for name, (calls, usec) in top},
        "forks": after["forks"] - before["forks"],
        "latest_fork_ms": round(after["latest_fork_usec"] / 1000, 1),
        "used_memory_mb": round(after["used_memory"] / 2**20, 1),
        "rss_mb": round(after["rss"] / 2**20, 1),
        "lua_memory_mb": round(after["lua"] / 2**20, 1),
        "allocator": after["allocator"],
        # Upper bounds of the buckets the quantiles fall in; None without a histogram.
        "service_lateness": {
            "delivered": sum(lateness.values()),
            "p50_ms_at_most": metrics.percentile_ms(lateness, 0.50),
            "p99_ms_at_most": metrics.percentile_ms(lateness, 0.99),
        },
    }
