"""How fast one Python process can schedule messages with ``Client.send_many``.

Redis is the embedded server, on loopback, AOF everysec.
"""

from __future__ import annotations

import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.harness import REDIS_DESCRIPTION
from bench.redis_load import redis_cpu_s
from delayline import Client
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import free_port
from delayline.timing import HORIZON_MS


def run(messages: int, chunk: int, delay_ms: int = 120_000) -> dict[str, Any]:
    """``delay_ms`` past the horizon (60 s) times the inbound path; within it, the near path."""
    with tempfile.TemporaryDirectory() as scratch:
        server = EmbeddedRedis(Path(scratch), port=free_port())
        server.start()
        try:
            with Client(server.url) as client:
                items = [
                    {"topic": "bench.orders", "body": b"x" * 100, "delay": delay_ms + n % 1_000}
                    for n in range(chunk)
                ]
                client.send_many(items)  # warm up the connection and the script cache
                raw = redis.Redis.from_url(server.url)
                cpu_s = redis_cpu_s(raw)
                started = time.perf_counter()
                for _ in range(messages // chunk):
                    client.send_many(items)
                elapsed_s = time.perf_counter() - started
                # What Redis's one core spends on the producer's side of a delivery.
                redis_cpu_used_s = redis_cpu_s(raw) - cpu_s
        finally:
            server.stop()
    sent = messages // chunk * chunk
    return {
        "benchmark": "send_many",
        "redis": REDIS_DESCRIPTION,
        "messages": sent,
        "chunk": chunk,
        "delay_ms": delay_ms,
        "path": "near (outbox)" if delay_ms + 1_000 <= HORIZON_MS else "inbound stream",
        "body_bytes": 100,
        "seconds": round(elapsed_s, 3),
        "messages_per_second": round(sent / elapsed_s),
        "redis_us_per_message": round(redis_cpu_used_s * 1e6 / sent, 2),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {_cpus()} cpus",
    }


def _cpus() -> int:
    import os

    return os.cpu_count() or 0
