"""Where a batch's time goes: the scheduler in this process under a steady load.

Reads Spark's progress events (durations per phase, state-operator times) and,
with ``--py-spy``, samples the Python workers (source, processor, sink) with
py-spy. Lateness is measured by a consumer thread, as in the benchmarks.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import psutil
import redis

from delayline import Client
from delayline.redis.embedded import EmbeddedRedis
from delayline.redis.inbound import StreamEntry
from delayline.scheduler.runtime.runner import Scheduler
from delayline.scheduler.settings import SchedulerSettings
from delayline.testing import free_port

TOPIC = "profile.jobs"


def run(rate: float, duration_s: float, py_spy: Path | None, **tuning: Any) -> dict[str, Any]:
    """Run the scheduler here under ``rate`` msg/s for ``duration_s``; ``tuning`` overrides
    scheduler settings."""
    scratch = Path(tempfile.mkdtemp(prefix="profile-"))
    server = EmbeddedRedis(scratch / "redis", free_port())
    server.start()
    settings = SchedulerSettings(redis_url=server.url, data_dir=scratch / "data").with_overrides(
        **tuning
    )
    scheduler = Scheduler(settings)
    try:
        scheduler.start()
        scheduler.wait_ready()
        lateness: list[int] = []
        stop = threading.Event()
        consumer = threading.Thread(target=_consume, args=(server.url, lateness, stop))
        consumer.start()
        spy = _start_py_spy(py_spy, duration_s) if py_spy else None
        first_batch = len(scheduler.recent_progress())
        sent = _produce(server.url, rate, duration_s)
        time.sleep(12)  # let the last messages (due <= 10 s after sending) arrive
        stop.set()
        consumer.join()
        if spy is not None:
            spy.wait()
        progress = scheduler.recent_progress()[first_batch:]
    finally:
        scheduler.stop()
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "rate": rate,
        "sent": sent,
        "received": len(lateness),
        "lateness_ms": _percentiles(lateness),
        "batches": _breakdown(progress),
        "settings": {k: v for k, v in tuning.items() if v is not None},
    }


def _produce(url: str, rate: float, duration_s: float) -> int:
    rng = random.Random(1)
    client = Client(url)
    started = time.monotonic()
    sent = 0
    for tick in range(int(duration_s * 10)):
        pause = started + tick / 10 - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        count = int(rate * (tick + 1) / 10) - int(rate * tick / 10)
        client.send_many(
            [
                {"topic": TOPIC, "body": b"x" * 100, "delay": rng.randint(1_000, 10_000)}
                for _ in range(count)
            ]
        )
        sent += count
    client.close()
    return sent


def _consume(url: str, lateness: list[int], stop: threading.Event) -> None:
    client = redis.Redis.from_url(url)
    last: bytes | str = "$"  # the first read takes what comes after now
    while not stop.is_set():
        found = cast(
            list[tuple[bytes, list[StreamEntry]]],
            client.xread({TOPIC: last}, count=5_000, block=200),
        )
        received_ms = time.time_ns() // 1_000_000
        for entry_id, fields in found[0][1] if found else []:
            lateness.append(received_ms - int(fields[b"deliver_at_ms"]))
            last = entry_id


def _start_py_spy(out: Path, duration_s: float) -> subprocess.Popen[bytes]:
    """Sample every Python process Spark started (workers included) for the load."""
    java = [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--subprocesses",
            "--nonblocking",
            "-p",
            str(java[0].pid),
            "-d",
            str(int(duration_s)),
            "-f",
            "raw",
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _percentiles(values: list[int]) -> dict[str, int | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def pick(fraction: float) -> int:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    return {"p50": pick(0.5), "p99": pick(0.99), "max": ordered[-1]}


def _breakdown(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Median ms per phase over the batches, plus state-operator times."""
    phases: dict[str, list[float]] = {}
    for event in progress:
        for phase, ms in event["durationMs"].items():
            phases.setdefault(phase, []).append(ms)
        for operator in event.get("stateOperators", []):
            per_partition = max(1, operator["numShufflePartitions"])
            phases.setdefault("state:update", []).append(
                operator["allUpdatesTimeMs"] / per_partition
            )
            phases.setdefault("state:commit", []).append(operator["commitTimeMs"] / per_partition)
        phases.setdefault("input_rows", []).append(event["numInputRows"])
    recent = [
        (
            event["batchId"],
            event["numInputRows"],
            event["durationMs"].get("triggerExecution"),
            event["durationMs"].get("addBatch"),
            event["timestamp"][-13:-1],
        )
        for event in progress
    ]
    return {"count": len(progress), "last_batches": recent} | {
        name: round(statistics.median(values), 1) for name, values in sorted(phases.items())
    }


def main(args: Any) -> None:
    result = run(
        args.rate,
        args.duration,
        args.py_spy,
        tick_ms=args.tick_ms,
        horizon_ms=args.horizon_ms,
        trigger_ms=args.trigger_ms,
        state_partitions=args.partitions,
        shards=args.shards,
        source_partitions=args.source_partitions,
        master=args.master,
    )
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
