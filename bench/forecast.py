"""How long the forecast takes to answer, and what its counters cost Redis, by pending count.

For each size, an empty embedded Redis is given the counters that that many
pending messages leave, written by the source's own call (``count_ingest``,
the Lua script that the scheduler runs per batch), in batches of 10,000: the
messages are spread at random over ``days`` (each on a random second, three
topics), plus a herd of 5,000 in one second. No Spark runs: the forecast reads
only these counters, so the time and memory depend on how many due minutes
and seconds hold messages, not on where the messages are.

Each query is timed ``repeats`` times through the SDK (``Client.pending``), and
the median is kept: the next hour by minute, the next day by hour, the window
of ``days`` by day, and the same window by minute (the most buckets). The
memory is Redis's ``used_memory`` after the counters, minus before.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis

from delayline import Client
from delayline.redis.embedded import EmbeddedRedis
from delayline.redis.inbound import InboundStream
from delayline.timing import from_epoch_ms, now_ms

TOPICS = ("orders.timeout", "reminders", "retries")
HERD = 5_000
BATCH = 10_000


def fill(url: str, pending: int, days: int, seed: int = 7) -> int:
    """Count ``pending`` messages (and a herd) as the source would; returns the herd's ms."""
    rng = random.Random(seed)
    start_ms = now_ms() // 1000 * 1000 + 60_000
    span_s = days * 86_400
    herd_ms = start_ms + rng.randrange(span_s) * 1000
    inbound = InboundStream.from_url(url)
    try:
        inbound.count_ingest("bench", 0, 0, {(herd_ms, TOPICS[0]): HERD}, cancels=0)
        for batch, first in enumerate(range(0, pending, BATCH), start=1):
            accepted: dict[tuple[int, str], int] = {}
            for _ in range(min(BATCH, pending - first)):
                due = (start_ms + rng.randrange(span_s) * 1000, rng.choice(TOPICS))
                accepted[due] = accepted.get(due, 0) + 1
            inbound.count_ingest("bench", 0, batch, accepted, cancels=0)
    finally:
        inbound.close()
    return herd_ms


def timed(call: Any, repeats: int) -> tuple[float, Any]:
    """The median wall time of ``call()`` in ms, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), result


def measure(pending: int, days: int, port: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data:
        server = EmbeddedRedis(Path(data), port)
        server.start()
        try:
            raw = redis.Redis.from_url(server.url)
            before = int(raw.info("memory")["used_memory"])
            began = time.perf_counter()
            herd_ms = fill(server.url, pending, days)
            fill_s = time.perf_counter() - began
            after = int(raw.info("memory")["used_memory"])
            raw.close()
            now = from_epoch_ms(now_ms())
            queries = {
                "next hour by minute": {"by": "minute", "end": now + timedelta(hours=1)},
                "next day by hour": {"by": "hour", "end": now + timedelta(days=1)},
                f"{days} days by day": {"by": "day"},
                f"{days} days by minute": {"by": "minute"},
            }
            result: dict[str, Any] = {
                "pending": pending + HERD,
                "days": days,
                "fill_s": round(fill_s, 1),
                "redis_bytes": after - before,
                "query_ms": {},
            }
            with Client(server.url) as client:
                for name, arguments in queries.items():
                    median_ms, forecast = timed(
                        lambda arguments=arguments: client.pending(start=now, **arguments), repeats
                    )
                    result["query_ms"][name] = round(median_ms, 1)
                    if name.endswith("by day"):
                        assert forecast.total == pending + HERD, forecast.total
                        assert [h.at_ms for h in forecast.hot] == [herd_ms]
            return result
        finally:
            server.stop()


def main(sizes: list[int], days: int, port: int, repeats: int = 5) -> dict[str, Any]:
    runs = []
    for pending in sizes:
        run = measure(pending, days, port, repeats)
        print(run, flush=True)
        runs.append(run)
    return {"runs": runs}
