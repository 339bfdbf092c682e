"""The five workloads, run against one started system. Times are epoch ms unless named _s.

Each returns a JSON-ready dict: parameters, achieved rate, the score of the
tracked jobs (lateness p50/p99/max, early, lost, duplicates), peak RSS of every
process of the system (its Redis included) and their CPU seconds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from bench.measure import Sampler, score
from bench.systems.base import RECEIPTS_KEY, Job, System, now_ms


@dataclass
class Bench:
    """A started system, its Redis pid, and the receipts Redis."""

    system: System
    redis_pid: int
    receipts: redis.Redis
    rng: random.Random

    def sampler(self) -> Sampler:
        return Sampler([*self.system.pids(), self.redis_pid])

    def receipts_by_key(self) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for raw in self.receipts.lrange(RECEIPTS_KEY, 0, -1):
            key, received = raw.decode().split(" ")
            found.setdefault(key, []).append(int(received))
        return found

    def wait_settled(self, due_ms: dict[str, int], timeout_s: float) -> None:
        """Until every tracked job is received, or ``timeout_s`` after the last is due."""
        deadline = time.monotonic() + timeout_s + max(0, max(due_ms.values()) - now_ms()) / 1000
        while time.monotonic() < deadline:
            received = self.receipts_by_key()
            if all(key in received for key in due_ms):
                return
            time.sleep(0.5)

    def produce(
        self, prefix: str, rate: float, duration_s: float, delay_ms: Callable[[], int]
    ) -> tuple[dict[str, int], float]:
        """Schedule ``rate`` jobs/s for ``duration_s`` in 100 ms ticks; returns (due, achieved)."""
        due: dict[str, int] = {}
        started = time.monotonic()
        ticks = int(duration_s * 10)
        for tick in range(ticks):
            target = started + tick / 10
            pause = target - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            count = int(rate * (tick + 1) / 10) - int(rate * tick / 10)
            stamp = now_ms()
            jobs = [Job(f"{prefix}-{len(due) + n}", stamp + delay_ms()) for n in range(count)]
            self.system.schedule(jobs)
            due.update((job.key, job.due_ms) for job in jobs)
        elapsed = max(time.monotonic() - started, duration_s)
        return due, len(due) / elapsed


def _result(
    workload: str,
    params: dict[str, Any],
    due: dict[str, int],
    bench: Bench,
    sampler: Sampler,
    achieved: float,
) -> dict[str, Any]:
    scored = score(due, bench.receipts_by_key())
    return {
        "system": bench.system.name,
        "workload": workload,
        "params": params,
        "achieved_rate": round(achieved, 1),
        **scored.summary(),
        "peak_rss_mb": round(sampler.peak_rss_mb, 1),
        "cpu_s": round(sampler.cpu_s, 1),
        "lateness_sample_ms": sorted(scored.lateness_ms)[
            :: max(1, len(scored.lateness_ms) // 2000)
        ],
        "rss_timeline": [(round(t, 1), round(mb, 1)) for t, mb in sampler.timeline[::4]],
    }


def steady(
    bench: Bench,
    *,
    rate: float,
    duration_s: float,
    min_delay_s: float,
    max_delay_s: float,
    name: str = "steady",
) -> dict[str, Any]:
    """``rate`` messages/s for ``duration_s``, delays uniform in [min, max] s."""
    low, high = int(min_delay_s * 1000), int(max_delay_s * 1000)
    with bench.sampler() as sampler:
        due, achieved = bench.produce(name, rate, duration_s, lambda: bench.rng.randint(low, high))
        bench.wait_settled(due, timeout_s=60)
    params = {"rate": rate, "duration_s": duration_s, "delay_s": [min_delay_s, max_delay_s]}
    return _result(name, params, due, bench, sampler, achieved)


def burst(
    bench: Bench, *, count: int, head_start_s: float = 20, settle_s: float = 120
) -> dict[str, Any]:
    """``count`` messages all due within the same second, ``head_start_s`` (plus count/2 ms) out:
    far enough that even a slow producer finishes before the second comes."""
    with bench.sampler() as sampler:
        started = time.monotonic()
        second_ms = now_ms() + int(head_start_s * 1000) + count // 2
        jobs = [Job(f"burst-{n}", second_ms + n % 1000) for n in range(count)]
        for start in range(0, count, 5_000):
            bench.system.schedule(jobs[start : start + 5_000])
        achieved = count / (time.monotonic() - started)
        due = {job.key: job.due_ms for job in jobs}
        bench.wait_settled(due, timeout_s=settle_s)
    return _result("burst", {"count": count}, due, bench, sampler, achieved)


#: How fast pending-heavy loads its far-future messages (msg/s, at most): the point
#: is memory with many pending, not with a backlog of unread input.
LOAD_RATE = 10_000
#: How long a system may take to absorb the load into its own store.
ABSORB_TIMEOUT_S = 600


def load_pending(bench: Bench, count: int, prefix: str) -> tuple[float, float]:
    """Schedule ``count`` messages due 1 to 24 h from now, then wait until the system
    has absorbed them; returns the seconds each took."""
    started = time.monotonic()
    for start in range(0, count, 10_000):
        pause = started + start / LOAD_RATE - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        stamp = now_ms()
        bench.system.schedule(
            [
                Job(f"{prefix}-{n}", stamp + bench.rng.randint(3_600_000, 86_400_000))
                for n in range(start, min(count, start + 10_000))
            ]
        )
    loaded = time.monotonic()
    bench.system.wait_absorbed(ABSORB_TIMEOUT_S)
    return loaded - started, time.monotonic() - loaded


def _load_params(
    pending: int, rate: float, duration_s: float, load_s: float, absorb_s: float
) -> dict[str, Any]:
    return {
        "pending": pending,
        "rate": rate,
        "duration_s": duration_s,
        "load_s": round(load_s, 1),
        "absorb_s": round(absorb_s, 1),
    }


def pending_heavy(bench: Bench, *, pending: int, rate: float, duration_s: float) -> dict[str, Any]:
    """``pending`` messages due in 1-24 h, while ``rate``/s with 1-10 s delays flows."""
    with bench.sampler() as sampler:
        load_s, absorb_s = load_pending(bench, pending, f"far{pending}")
        due, achieved = bench.produce(
            f"near{pending}", rate, duration_s, lambda: bench.rng.randint(1_000, 10_000)
        )
        bench.wait_settled(due, timeout_s=60)
    params = _load_params(pending, rate, duration_s, load_s, absorb_s)
    return _result("pending-heavy", params, due, bench, sampler, achieved)


def saturation(
    bench: Bench, *, rates: list[float], step_s: float, warmup_s: float = 0
) -> dict[str, Any]:
    """Step the rate up until p99 lateness passes 1 s or the system falls behind.

    A first ``warmup_s`` at the lowest rate is not scored: a JVM's first batches
    compile their code, and a cold start is not what capacity measures.
    """
    if warmup_s:
        steady(bench, rate=rates[0], duration_s=warmup_s, min_delay_s=1, max_delay_s=10,
               name="satwarmup")  # fmt: skip
    steps = []
    capacity = 0.0
    for rate in rates:
        result = steady(
            bench,
            rate=rate,
            duration_s=step_s,
            min_delay_s=1,
            max_delay_s=10,
            name=f"sat{int(rate)}",
        )
        p99 = result["lateness_p99_ms"]
        kept_up = result["lost"] == 0 and result["achieved_rate"] >= 0.95 * rate
        good = kept_up and p99 is not None and p99 <= 1_000
        steps.append(
            {
                key: result[key]
                for key in (
                    "params",
                    "achieved_rate",
                    "lateness_p50_ms",
                    "lateness_p99_ms",
                    "lost",
                    "early",
                    "duplicates",
                    "peak_rss_mb",
                )
            }
            | {"good": good}
        )
        if not good:
            break
        capacity = rate
    return {
        "system": bench.system.name,
        "workload": "saturation",
        "params": {"rates": rates, "step_s": step_s, "warmup_s": warmup_s},
        "capacity": capacity,
        "steps": steps,
    }


def recovery(bench: Bench, *, pending: int, rate: float, duration_s: float) -> dict[str, Any]:
    """In pending-heavy, SIGKILL the scheduler/worker mid-stream and restart it.

    Reports the seconds from the restart command to the first delivery after
    it, and lost, duplicated or early deliveries among the streamed messages.
    """
    with bench.sampler() as sampler:
        load_s, absorb_s = load_pending(bench, pending, f"rfar{pending}")
        half = duration_s / 2
        due, first_rate = bench.produce(
            "rnear-a", rate, half, lambda: bench.rng.randint(1_000, 10_000)
        )
        bench.system.kill()
        killed_ms = now_ms()
        # A consumer that outlives the kill drains what was delivered before it:
        # only receipts after that count as the restarted system's.
        received_before = -1
        while received_before != bench.receipts.llen(RECEIPTS_KEY):
            received_before = bench.receipts.llen(RECEIPTS_KEY)
            time.sleep(1)
        restart_started = time.monotonic()
        restart_started_ms = now_ms()
        bench.system.restart()
        restarted_s = time.monotonic() - restart_started
        sampler.roots = [*bench.system.pids(), bench.redis_pid]
        more, second_rate = bench.produce(
            "rnear-b", rate, half, lambda: bench.rng.randint(1_000, 10_000)
        )
        due.update(more)
        bench.wait_settled(due, timeout_s=120)
        # From the receipts' own clock: deliveries may start before restart() returns
        # (delayline's outbox pump) and must not wait for the producer above.
        after = bench.receipts.lrange(RECEIPTS_KEY, received_before, -1)
        first_ms = min((int(raw.split(b" ")[1]) for raw in after), default=None)
        first_delivery_s = None if first_ms is None else (first_ms - restart_started_ms) / 1000
    params = _load_params(pending, rate, duration_s, load_s, absorb_s) | {"killed_at_ms": killed_ms}
    result = _result("recovery", params, due, bench, sampler, (first_rate + second_rate) / 2)
    result["restart_s"] = round(restarted_s, 1)
    result["first_delivery_after_restart_s"] = (
        None if first_delivery_s is None else round(first_delivery_s, 1)
    )
    return result
