"""The workloads, run against one started system. Times are epoch ms unless named _s.

- ``burst``: ``count`` messages due in the same second (50,000; 500,000 as ``burst-500k``).
- ``steady``: ``rate``/s for ``duration_s``, delays uniform in [min, max] s, by the
  system's own producer API (for delayline, the SDK).
- ``steady-raw`` (delayline): the same, written as raw v1 records with plain pipelined
  ``XADD`` to ``delayline:inbound``, as a producer in another language would.
- ``capacity``: contiguous steps of rising rate after an unscored warm-up; each step's
  messages are scored on their own.
- ``pending-heavy``: with ``pending`` messages due 1-2 h ahead, a short stream.
- ``idle``: with ``pending`` messages due 1-2 h ahead and no traffic, CPU and PSS.
- ``recovery``: with ``pending`` pending, SIGKILL the scheduler or worker mid-stream,
  restart it, and time the way back.

The far-future messages of pending-heavy, idle and recovery are loaded once per
session (:meth:`Bench.ensure_pending`): a session with several of them grows its
backlog from one size to the next instead of starting again.

Each returns a JSON-ready dict: parameters, achieved rate, the score of the
tracked jobs (lateness p50/p99/max, early, lost, duplicates), the peak summed
PSS of every process of the system (its Redis included), per process too, and
their CPU seconds. "Lost" means not received ``settle_s`` after the last was due.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench import redis_load
from bench.measure import Receipts, Sampler, score
from bench.systems import PRODUCER_RATE
from bench.systems.base import Job, System, now_ms

#: Seconds after the last message is due that a workload waits before calling the
#: rest lost. The peers fall minutes behind at 5,000 msg/s; waiting longer would
#: only turn "lost" into a larger lateness, at minutes of wall time per run.
SETTLE_S = 20
#: steady and steady-raw score lateness separately below and above this delay.
DELAY_SPLIT_MS = 10_000
#: Far-future messages (pending-heavy, idle, recovery) are due this far ahead (ms).
FAR_DELAY_MS = (3_600_000, 7_200_000)
#: How long a system may take to absorb loaded messages into its own store.
ABSORB_TIMEOUT_S = 900
#: While loading pending messages, the loader waits whenever more than this many
#: wait unread on the system's inbound side (a system that reports one): the
#: load goes at the rate the system absorbs, as a producer's would, and memory
#: measured afterwards is about pending messages, not about a backlog once held.
LOAD_BACKLOG = 100_000
#: After a load, how long a workload lets the system rest before it measures (s):
#: its figures are about N messages pending, not about the tail of loading them.
#: delayline collects the heap a load grew 5 s after the load's last batch
#: (QuietSpells), and the JVM returns freed native memory every 5 s.
REST_AFTER_LOAD_S = 15
#: capacity: a step is good if its p99 is at most this, with nothing lost, duplicated
#: or early, and the generator reached 95% of the step's rate.
CAPACITY_P99_MS = 100


@dataclass
class Produced:
    """What :meth:`Bench.produce` sent: due time and delay per key, achieved rate."""

    due: dict[str, int]
    delay: dict[str, int]
    achieved: float
    seconds: float


@dataclass
class Bench:
    """A started system, its Redis pid, the receipts, and the far-future messages loaded."""

    system: System
    redis_pid: int
    receipts: Receipts
    rng: random.Random
    pending: int = 0

    def roots(self) -> list[int]:
        return [*self.system.pids(), self.redis_pid]

    def sampler(self, interval_s: float = 0.5) -> Sampler:
        return Sampler(self.roots(), interval_s)

    def wait_settled(self, due_ms: Mapping[str, int], timeout_s: float) -> None:
        """Until every tracked job is received, or ``timeout_s`` after the last is due."""
        self.receipts.refresh()
        missing = {key for key in due_ms if key not in self.receipts.first}
        last_due_ms = max(due_ms.values(), default=now_ms())
        deadline = time.monotonic() + timeout_s + max(0, last_due_ms - now_ms()) / 1000
        while missing and time.monotonic() < deadline:
            time.sleep(0.5)
            missing.difference_update(self.receipts.refresh())

    def produce(
        self,
        prefix: str,
        rate: float,
        duration_s: float,
        delay_ms: Callable[[], int],
        *,
        raw: bool = False,
        stop: threading.Event | None = None,
    ) -> Produced:
        """Schedule ``rate`` jobs/s for ``duration_s`` (or until ``stop``), in 100 ms ticks.

        A generator that falls behind sends what it owes as fast as it can, 200 ms'
        worth at a time, and stops at ``duration_s`` all the same: what it reached
        is the achieved rate. ``raw``: through ``schedule_raw`` (delayline's XADD).
        """
        schedule = self._raw_producer() if raw else self.system.schedule
        due: dict[str, int] = {}
        delays: dict[str, int] = {}
        started = time.monotonic()
        tick = 0
        while tick / 10 < duration_s and not (stop is not None and stop.is_set()):
            pause = started + tick / 10 - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            elif time.monotonic() - started >= duration_s:
                break
            owed = int(rate * min(duration_s, (tick + 1) / 10)) - len(due)
            count = min(owed, max(1, int(rate / 5)))  # at most 200 ms' worth at a time
            stamp = now_ms()
            jobs = []
            for n in range(len(due), len(due) + count):
                delay = delay_ms()
                key = f"{prefix}-{n}"
                jobs.append(Job(key, stamp + delay))
                delays[key] = delay
            if jobs:
                schedule(jobs)
            due.update((job.key, job.due_ms) for job in jobs)
            tick = max(tick + 1, int((time.monotonic() - started) * 10))
        elapsed = time.monotonic() - started
        if stop is None or not stop.is_set():
            elapsed = max(elapsed, duration_s)
        return Produced(due, delays, len(due) / max(elapsed, 1e-3), elapsed)

    def _raw_producer(self) -> Callable[[Sequence[Job]], None]:
        raw: Callable[[Sequence[Job]], None] | None = getattr(self.system, "schedule_raw", None)
        if raw is None:
            raise NotImplementedError(f"{self.system.name} has no raw producer")
        return raw

    def ensure_pending(self, count: int) -> dict[str, Any]:
        """Load far-future messages (due 1-2 h ahead, by the system's own producer)
        until ``count`` are pending in this session, wait until the system has
        absorbed them, then REST_AFTER_LOAD_S more. Returns what it did, for the
        result's params."""
        todo = max(0, count - self.pending)
        started = time.monotonic()
        deadline = started + ABSORB_TIMEOUT_S
        for start in range(self.pending, count, 10_000):
            while (
                self.system.backlog().get("inbound", 0) > LOAD_BACKLOG
                and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            stamp = now_ms()
            self.system.schedule(
                [
                    Job(f"far-{n}", stamp + self.rng.randint(*FAR_DELAY_MS))
                    for n in range(start, min(count, start + 10_000))
                ]
            )
        loaded = time.monotonic()
        absorbed = self.system.wait_absorbed(ABSORB_TIMEOUT_S) if todo else True
        absorb_s = time.monotonic() - loaded
        if todo:
            time.sleep(REST_AFTER_LOAD_S)
        self.pending = max(self.pending, count)
        return {
            "pending": count,
            "loaded_now": todo,
            "load_s": round(loaded - started, 1),
            "absorb_s": round(absorb_s, 1),
            "absorbed": absorbed,
            "rested_s": REST_AFTER_LOAD_S if todo else 0,
        }


#: A workload: what a plan step runs against a started system; its result, for JSON.
Workload = Callable[[Bench], dict[str, Any]]


def _far_ms(rng: random.Random) -> Callable[[], int]:
    return lambda: rng.randint(*FAR_DELAY_MS)


def _uniform_ms(bench: Bench, low_s: float, high_s: float) -> Callable[[], int]:
    low, high = int(low_s * 1000), int(high_s * 1000)
    return lambda: bench.rng.randint(low, high)


def _memory(sampler: Sampler) -> dict[str, Any]:
    return {
        "peak_pss_mb": round(sampler.peak_pss_mb, 1),
        "cpu_s": round(sampler.cpu_s, 1),
        "pss_timeline": [(round(t, 1), round(mb, 1)) for t, mb in sampler.timeline[::4]],
        "processes": sampler.processes(),
    }


def _result(
    workload: str,
    params: dict[str, Any],
    due: Mapping[str, int],
    bench: Bench,
    sampler: Sampler,
    achieved: float,
) -> dict[str, Any]:
    scored = score(due, bench.receipts)
    return {
        "system": bench.system.name,
        "workload": workload,
        "params": params,
        "achieved_rate": round(achieved, 1),
        **scored.summary(),
        "lateness_sample_ms": sorted(scored.lateness_ms)[
            :: max(1, len(scored.lateness_ms) // 2000)
        ],
        **_memory(sampler),
    }


def by_delay(produced: Produced, receipts: Receipts) -> dict[str, Any]:
    """The score of the messages sent with a delay below DELAY_SPLIT_MS, and of the rest."""
    short = {k: due for k, due in produced.due.items() if produced.delay[k] < DELAY_SPLIT_MS}
    long = {k: due for k, due in produced.due.items() if produced.delay[k] >= DELAY_SPLIT_MS}
    return {
        "split_ms": DELAY_SPLIT_MS,
        "below": score(short, receipts).summary(),
        "above": score(long, receipts).summary(),
    }


def steady(
    bench: Bench,
    *,
    rate: float,
    duration_s: float,
    min_delay_s: float,
    max_delay_s: float,
    settle_s: float = SETTLE_S,
    raw: bool = False,
    shadow: bool = False,
) -> dict[str, Any]:
    """``rate`` messages/s for ``duration_s``, delays uniform in [min, max] s.

    ``raw``: written as raw v1 records with plain XADD (steady-raw) instead of the
    system's producer API. Lateness is also scored below and above 10 s of delay.
    ``shadow`` (steady-shadow, an experiment): the system's API as in steady, and
    meanwhile as many raw records a second due 1-2 h ahead, not scored: the
    input steady-raw makes the scheduler read, without the deliveries.
    """
    name = "steady-shadow" if shadow else "steady-raw" if raw else "steady"
    shadowing = threading.Thread(
        target=bench.produce,
        args=("shadow", rate, duration_s, _far_ms(random.Random(bench.rng.random()))),
        kwargs={"raw": True},
        daemon=True,
    )
    with bench.sampler() as sampler:
        if shadow:
            shadowing.start()
        produced = bench.produce(
            name, rate, duration_s, _uniform_ms(bench, min_delay_s, max_delay_s), raw=raw
        )
        if shadow:
            shadowing.join()
            bench.pending += int(rate * duration_s)
        bench.wait_settled(produced.due, timeout_s=settle_s)
    producer = "raw XADD" if raw else "SDK / own API"
    params = {
        "rate": rate,
        "duration_s": duration_s,
        "delay_s": [min_delay_s, max_delay_s],
        "producer": producer + (", and as many raw XADD due 1-2 h ahead" if shadow else ""),
        "settle_s": settle_s,
    }
    result = _result(name, params, produced.due, bench, sampler, produced.achieved)
    result["by_delay"] = by_delay(produced, bench.receipts)
    return result


def burst(
    bench: Bench,
    *,
    count: int,
    head_start_s: float = 5,
    settle_s: float = SETTLE_S,
    name: str = "burst",
) -> dict[str, Any]:
    """``count`` messages all due within the same second.

    The second is ``head_start_s`` plus the time the system's producer needs for
    ``count`` at its usual rate (PRODUCER_RATE) ahead, so that the producer is done
    before it comes; ``sent_after_due`` counts the messages for which it was not.
    """
    rate = PRODUCER_RATE.get(bench.system.name, 1_000)
    with bench.sampler() as sampler:
        started, started_ms = time.monotonic(), now_ms()
        second_ms = started_ms + int((head_start_s + count / rate) * 1000)
        jobs = [Job(f"{name}-{n}", second_ms + n % 1000) for n in range(count)]
        sent_after_due = 0
        for start in range(0, count, 5_000):
            chunk = jobs[start : start + 5_000]
            bench.system.schedule(chunk)
            sent_ms = now_ms()
            sent_after_due += sum(1 for job in chunk if job.due_ms < sent_ms)
        produce_s = time.monotonic() - started
        due = {job.key: job.due_ms for job in jobs}
        with redis_load.BusyWindow(bench.system.redis_url, second_ms, 1_000) as busy:
            bench.wait_settled(due, timeout_s=settle_s)
    result = _result(name, {"count": count, "settle_s": settle_s}, due, bench, sampler,
                     count / produce_s)  # fmt: skip
    received = [bench.receipts.first[key] for key in due if key in bench.receipts.first]
    result |= {
        "due_in_s": round((second_ms - started_ms) / 1000, 1),
        "produce_s": round(produce_s, 1),
        "sent_after_due": sent_after_due,
        "last_delivery_s": round((max(received) - second_ms) / 1000, 3) if received else None,
        # Redis's main thread in the second the messages are due (1.0: no idle moment).
        "redis_busy_in_due_second": busy.fraction,
    }
    return result


def capacity(
    bench: Bench,
    *,
    rates: list[float],
    step_s: float,
    warmup_s: float,
    min_delay_s: float,
    max_delay_s: float,
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """Contiguous steps at ``rates`` (``step_s`` each) after ``warmup_s`` at the first
    rate, unscored; then one wait for everything. Each step's messages are scored on
    their own; with delays up to ``max_delay_s`` they are delivered while later steps
    send, so a step is judged under its own input rate and the delivery load of the
    steps before it.

    capacity: the highest step whose generator reached 95% of the rate, with
    p99 <= CAPACITY_P99_MS and nothing lost, duplicated or early.
    """
    delay = _uniform_ms(bench, min_delay_s, max_delay_s)
    with bench.sampler() as sampler:
        if warmup_s:
            bench.produce("capwarm", rates[0], warmup_s, delay)
        runs = [(rate, bench.produce(f"cap{int(rate)}", rate, step_s, delay)) for rate in rates]
        everything = {key: due for _, produced in runs for key, due in produced.due.items()}
        bench.wait_settled(everything, timeout_s=settle_s)
    steps = []
    for rate, produced in runs:
        scored = score(produced.due, bench.receipts).summary()
        reached = produced.achieved >= 0.95 * rate
        p99 = scored["lateness_p99_ms"]
        clean = scored["lost"] == scored["duplicates"] == scored["early"] == 0
        fast = p99 is not None and p99 <= CAPACITY_P99_MS
        steps.append(
            {
                "rate": rate,
                "achieved_rate": round(produced.achieved, 1),
                "generator_limited": not reached,
                **scored,
                "good": reached and clean and fast,
                "good_at_achieved": clean and fast,
            }
        )
    return {
        "system": bench.system.name,
        "workload": "capacity",
        "params": {
            "rates": rates,
            "step_s": step_s,
            "warmup_s": warmup_s,
            "delay_s": [min_delay_s, max_delay_s],
            "p99_limit_ms": CAPACITY_P99_MS,
            "settle_s": settle_s,
        },
        "capacity": max((step["rate"] for step in steps if step["good"]), default=0.0),
        "capacity_achieved": max(
            (step["achieved_rate"] for step in steps if step["good_at_achieved"]), default=0.0
        ),
        "steps": steps,
        **_memory(sampler),
    }


def pending_heavy(
    bench: Bench,
    *,
    pending: int,
    rate: float,
    duration_s: float,
    min_delay_s: float = 1,
    max_delay_s: float = 10,
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """With ``pending`` messages due 1-2 h ahead (absorbed first), ``rate``/s with short
    delays for ``duration_s``. Memory is sampled from the stream's start: it is
    about pending messages, not about a backlog of unread input."""
    loading = bench.ensure_pending(pending)
    with bench.sampler() as sampler:
        produced = bench.produce(
            f"near{pending}", rate, duration_s, _uniform_ms(bench, min_delay_s, max_delay_s)
        )
        bench.wait_settled(produced.due, timeout_s=settle_s)
    params = loading | {"rate": rate, "duration_s": duration_s,
                        "delay_s": [min_delay_s, max_delay_s], "settle_s": settle_s}  # fmt: skip
    result = _result("pending-heavy", params, produced.due, bench, sampler, produced.achieved)
    result["backlog"] = bench.system.backlog()
    return result


def idle(bench: Bench, *, pending: int, measure_s: float) -> dict[str, Any]:
    """Load ``pending`` messages due 1-2 h ahead, wait until absorbed, then measure
    ``measure_s`` of no traffic: CPU in cores (CPU s / wall s) of every process of
    the system, its Redis included, and the PSS of each."""
    loading = bench.ensure_pending(pending)
    before = bench.system.backlog()
    bench.receipts.refresh()
    received_before = bench.receipts.offset
    with bench.sampler(interval_s=1.0) as sampler:
        time.sleep(measure_s)
    bench.receipts.refresh()
    return {
        "system": bench.system.name,
        "workload": "idle",
        "params": loading | {"measure_s": measure_s},
        "cpu_s": round(sampler.cpu_s, 2),
        "measured_s": round(sampler.wall_s, 1),
        "cpu_cores": round(sampler.cpu_s / max(sampler.wall_s, 1e-3), 4),
        "pss_mb": round(sampler.last_pss_mb, 1),
        "peak_pss_mb": round(sampler.peak_pss_mb, 1),
        "processes": sampler.processes(),
        "deliveries_during": bench.receipts.offset - received_before,
        "backlog_before": before,
        "backlog_after": bench.system.backlog(),
    }


def recovery(
    bench: Bench,
    *,
    pending: int,
    rate: float,
    before_s: float,
    after_s: float,
    min_delay_s: float = 1,
    max_delay_s: float = 10,
    settle_s: float = SETTLE_S,
    probe_interval_s: float = 0.25,
    back_timeout_s: float = 420,
) -> dict[str, Any]:
    """With ``pending`` messages pending and ``rate``/s flowing (delays 1-10 s), SIGKILL
    the scheduler/worker after ``before_s``, restart it at once, and keep the stream
    going until ``after_s`` after the system is back.

    A system with a raw producer (delayline) also gets a *probe*, a raw record due
    at once, every ``probe_interval_s`` from the kill on: raw records always go
    through the Spark job, so the first probe delivered says when the Spark path is
    back (``spark_back_s``, from the restart command). ``during_restart`` scores the
    streamed messages due between the kill and that moment (or, without probes,
    the first delivery after the restart).
    """
    loading = bench.ensure_pending(pending)
    raw: Callable[[Sequence[Job]], None] | None = getattr(bench.system, "schedule_raw", None)
    stop, probe_stop = threading.Event(), threading.Event()
    box: dict[str, Produced] = {}
    probes: dict[str, int] = {}

    def stream() -> None:
        box["produced"] = bench.produce(
            "rnear", rate, 3_600, _uniform_ms(bench, min_delay_s, max_delay_s), stop=stop
        )

    def probe() -> None:
        assert raw is not None
        while not probe_stop.is_set():
            job = Job(f"probe-{len(probes)}", now_ms())
            raw([job])
            probes[job.key] = job.due_ms
            probe_stop.wait(probe_interval_s)

    producer = threading.Thread(target=stream, daemon=True)
    prober = threading.Thread(target=probe, daemon=True)
    back_ms: int | None = None
    with bench.sampler() as sampler:
        producer.start()
        try:
            time.sleep(before_s)
            bench.system.kill()
            killed_ms = now_ms()
            if raw is not None:
                prober.start()
            restart_started_ms = now_ms()
            bench.system.restart()
            restarted_ms = now_ms()
            sampler.roots = bench.roots()
            deadline = time.monotonic() + back_timeout_s
            while raw is not None and back_ms is None and time.monotonic() < deadline:
                bench.receipts.refresh()
                seen = [bench.receipts.first[k] for k in dict(probes) if k in bench.receipts.first]
                back_ms = min(seen) if seen else None
                time.sleep(0.1)
            probe_stop.set()
            time.sleep(after_s)
        finally:
            stop.set()
            probe_stop.set()
            producer.join()
            if prober.is_alive():
                prober.join()
        produced = box["produced"]
        bench.wait_settled(produced.due | probes, timeout_s=settle_s)
    after = [
        t
        for k in (*produced.due, *probes)
        if (t := bench.receipts.first.get(k, 0)) >= restart_started_ms
    ]
    # Without probes: until the restarted system delivers again.
    window_end_ms = back_ms if back_ms is not None else max(restarted_ms, min(after, default=0))
    during = {k: due for k, due in produced.due.items() if killed_ms <= due <= window_end_ms}
    params = loading | {"rate": rate, "before_s": before_s, "after_s": after_s,
                        "delay_s": [min_delay_s, max_delay_s], "settle_s": settle_s}  # fmt: skip
    result = _result("recovery", params, produced.due, bench, sampler, produced.achieved)
    result |= {
        "restart_s": round((restarted_ms - restart_started_ms) / 1000, 1),
        "first_delivery_after_restart_s": (
            round((min(after) - restart_started_ms) / 1000, 1) if after else None
        ),
        "spark_back_s": (
            None if back_ms is None else round((back_ms - restart_started_ms) / 1000, 1)
        ),
        "during_restart": {
            "from_ms": killed_ms,
            "to_ms": window_end_ms,
            **score(during, bench.receipts).summary(),
        },
        "probes": score(probes, bench.receipts).summary() if probes else None,
        "killed_at_ms": killed_ms,
    }
    return result
