"""Running workloads against one system: its own Redis, a receipts Redis, results to JSON.

Every system talks to the same kind of Redis server: the embedded one (Valkey
8.1, or $DELAYLINE_EMBEDDED_SERVER), on loopback, AOF everysec, one server per run.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from bench import redis_load
from bench.measure import Receipts
from bench.systems.base import SystemFactory
from bench.workloads import Bench
from delayline.redis.embedded import EmbeddedRedis, server_executable, server_version
from delayline.testing import free_port

REDIS_DESCRIPTION = (
    f"{server_version(server_executable())} (embedded, with a password), loopback, AOF everysec"
)

if TYPE_CHECKING:
    from bench.plans import Step


def run_system(
    factory: SystemFactory, steps: Sequence[Step], out_dir: Path, seed: int = 7
) -> list[dict[str, Any]]:
    """Start one system on fresh Redis servers and run ``steps`` on it, in order.

    Each result file gets the step's wall time (``wall_s``), the system's start
    time (``start_s``) and the session's steps.
    """
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
        receipts = Receipts(redis.Redis.from_url(receipts_redis.url))
        system_client = redis.Redis.from_url(system_redis.url)
        redis_pid = int(system_client.info("server")["process_id"])
        bench = Bench(system, redis_pid, receipts, random.Random(seed))
        for step in steps:
            print(f"[{system.name}] {step.name} ...", flush=True)
            began = time.monotonic()
            load_before = redis_load.snapshot(system_client)
            cpu_before_s = time.process_time()
            result = step.run(bench)
            result |= {
                # This process: the load generator, and the sampling and scoring.
                "harness_cpu_s": round(time.process_time() - cpu_before_s, 1),
                "redis_load": redis_load.cost(
                    load_before, redis_load.snapshot(system_client), messages_of(result)
                ),
                "name": step.name,
                "wall_s": round(time.monotonic() - began, 1),
                "start_s": round(start_s, 1),
                "session": [item.name for item in steps],
                "redis": REDIS_DESCRIPTION,
            }
            results.append(result)
            out_dir.mkdir(parents=True, exist_ok=True)
            target = out_dir / f"{system.name}-{step.name}.json"
            target.write_text(json.dumps(result, indent=1) + "\n")
            print(f"[{system.name}] {step.name}: {headline(result)}", flush=True)
    finally:
        try:
            system.stop()
        except Exception as error:  # a system that failed to start may not stop cleanly
            print(f"[{system.name}] stop failed: {error!r}", flush=True)
        system_redis.stop()
        receipts_redis.stop()
        keep_logs(system.workdir, out_dir / "logs" / f"{system.name}-{steps[0].name}")
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def messages_of(result: dict[str, Any]) -> int:
    """The messages a workload sent: those scored, and a capacity run's warm-up."""
    if "expected" in result:
        return int(result["expected"])
    if result["workload"] == "capacity":
        params = result["params"]
        warmup = params.get("warmup_s", 0) * params["rates"][0]
        return int(warmup + sum(step["expected"] for step in result["steps"]))
    return int(result.get("params", {}).get("pending", 0))


def keep_logs(workdir: Path, target: Path) -> None:
    """Copy the system's logs out of its scratch directory: they explain the numbers."""
    logs = sorted(workdir.glob("*.log*"))
    if logs:
        target.mkdir(parents=True, exist_ok=True)
        for log in logs:
            shutil.copy2(log, target / log.name)


def headline(result: dict[str, Any]) -> str:
    """One line for the console."""
    wall = f"({result['wall_s']:g} s)"
    if result["workload"] == "capacity":
        steps = ", ".join(
            f"{step['rate']:g}->{step['achieved_rate']:g}/s p99 {step['lateness_p99_ms']}"
            for step in result["steps"]
        )
        return f"capacity {result['capacity']:g}/s [{steps}] {wall}"
    if result["workload"] == "absorb":
        return (
            f"{result['absorbed_per_s']:,.0f} msg/s absorbed, "
            f"{result['cpu_per_1k_msg_s']} cores per 1,000 msg/s {wall}"
        )
    if result["workload"] == "idle":
        return (
            f"{result['cpu_cores']:.3f} cores, PSS {result['pss_mb']:,.0f} MB, "
            f"{result['params']['pending']:,} pending {wall}"
        )
    line = (
        f"rate {result['achieved_rate']}/s p50 {result['lateness_p50_ms']} ms "
        f"p99 {result['lateness_p99_ms']} ms max {result['lateness_max_ms']} ms "
        f"early {result['early']} lost {result['lost']} dup {result['duplicates']} "
        f"pss {result['peak_pss_mb']} MB cpu {result['cpu_s']} s"
    )
    if result["workload"] == "recovery":
        during = result["during_restart"]
        line += (
            f"; restart {result['restart_s']} s, spark back {result['spark_back_s']} s, "
            f"due during restart p99 {during['lateness_p99_ms']} ms ({during['expected']})"
        )
    if "last_delivery_s" in result:
        line += f"; last delivery {result['last_delivery_s']} s after due"
    return f"{line} {wall}"
