"""``python -m bench redis-cluster``: three Redis shards on one primary against three
spread over three primaries, on one Redis Cluster (one shard is refused there).

Each deployment is a fresh cluster of 3 primaries with a replica each
(:class:`~delayline.testing.redis_cluster.LocalRedisCluster`), each shard's slot
moved to a primary of its own first (as ``slots.spread_shards`` does; ``3@1``:
all three on the first primary), a fresh data dir, and ``delayline run
--redis-url <cluster> --no-api --inbound-shards N``. Two sessions, each on a
fresh deployment (one in all with --quick):

- ``capacity``: the capacity workload of ``bench run`` (delays within the horizon,
  so the SDK's near path puts each message into its shard's outbox), at 25,000
  (the reference), 30,000, 40,000 and 50,000 msg/s after a warm-up, sent by
  ``producers`` processes (bench/cluster_load.py) to topics spread over the
  primaries; capacity is the highest step with p99 <= 100 ms, none lost,
  doubled or early, and 95% of the rate reached;
- ``burst``: 500,000 messages due in one second, as ``burst-500k`` (its second
  5 s plus the burst at ``burst_rate`` ahead): the time from that second to the last
  delivery, and the lateness.

Every node's CPU (its process, psutil, and its main thread, ``INFO cpu``) is read
at each step's edges: over a window, divided by the messages delivered in it,
the Redis µs per message of each primary and replica. Every process is sampled
for CPU and PSS (the system: the nodes, the scheduler and its JVM, the consumer;
the generator: the producers and the receipts Redis) as the other bench commands
do, and the machine's busy CPU beside them: what another job on the 2 cores took.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench import cluster_report
from bench.cluster_deploy import (
    Deployment,
    check_producers,
    deployment,
    parse_spec,
    start_producers,
    wait_producers,
)
from bench.cluster_load import delivered_in, per_message_us
from bench.cluster_load import schedule as phase_schedule
from bench.measure import Receipts, Sampler, score
from bench.workloads import CAPACITY_P99_MS


@dataclass(frozen=True)
class Params:
    rates: list[float] = field(default_factory=lambda: [25_000.0, 30_000.0, 40_000.0, 50_000.0])
    step_s: float = 30.0
    warmup_s: float = 10.0
    delay_s: tuple[float, float] = (1.0, 45.0)
    settle_s: float = 30.0
    burst: int = 500_000
    #: The burst's second is this far ahead, plus the burst at ``burst_rate`` msg/s:
    #: below burst-500k's 7,500 (PRODUCER_RATE), as every send on a cluster waits for
    #: a replica. What is sent more than the horizon (60 s) ahead goes through the
    #: inbound stream and Spark; 10,000 puts the second 55 s ahead, so that every
    #: message the producers send in time goes straight into its shard's outbox.
    head_start_s: float = 5.0
    burst_rate: float = 5_000.0
    producers: int = 4
    topics_per_primary: int = 1
    #: Deployments (``N`` or ``N@P``: cluster_deploy.parse_spec).
    shards: tuple[str, ...] = ("3@1", "3")
    #: One session per deployment for both workloads (--quick), or one each.
    one_session: bool = False
    workloads: tuple[str, ...] = ("capacity", "burst")


FULL = Params()
QUICK = Params(rates=[300.0, 600.0], step_s=4.0, warmup_s=2.0, delay_s=(0.5, 2.0),
               settle_s=15.0, burst=3_000, head_start_s=3.0, producers=2, shards=("3",),
               one_session=True)  # fmt: skip
#: Seconds to start a deployment (cluster, Spark, consumer) and to stop it, on 2 cores
#: (Spark took 60-115 s to start in the 2026-11-26 runs).
START_S, STOP_S = 100.0, 15.0
WORKLOADS = ("capacity", "burst")


def estimate_s(params: Params) -> float:
    """The plan's wall time: each deployment's sessions, start and stop included."""
    seconds = {
        "capacity": params.warmup_s + params.step_s * len(params.rates) + params.settle_s + 15,
        "burst": params.head_start_s + params.burst / params.burst_rate + params.settle_s,
    }
    sessions = 1 if params.one_session else len(params.workloads)
    work = sum(seconds[name] for name in params.workloads)
    return len(params.shards) * (sessions * (START_S + STOP_S) + work)


def _cpu_between(before: dict[str, tuple[float, float]],
                 after: dict[str, tuple[float, float]]) -> dict[str, dict[str, float]]:  # fmt: skip
    return {
        "process_s": {n: round(after[n][0] - before[n][0], 3) for n in after},
        "main_thread_s": {n: round(after[n][1] - before[n][1], 3) for n in after},
    }


def _window(cpu: dict[str, dict[str, float]], delivered: int) -> dict[str, Any]:
    return cpu | {
        "delivered": delivered,
        "process_us_per_msg": per_message_us(cpu["process_s"], delivered),
        "main_thread_us_per_msg": per_message_us(cpu["main_thread_s"], delivered),
    }


def _received_sorted(receipts: Receipts) -> np.ndarray[Any, Any]:
    return np.sort(np.fromiter(receipts.first.values(), dtype=np.int64))


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has spent busy (not idle) since boot."""
    times = psutil.cpu_times()
    # guest time is counted in user time already.
    left_out = ("idle", "iowait", "guest", "guest_nice")
    return float(sum(getattr(times, name) for name in times._fields if name not in left_out))


def _processes(system: Sampler, generator: Sampler, since: tuple[float, float]) -> dict[str, Any]:
    """Every process's CPU and PSS (the generator: the producers and the receipts Redis);
    the machine's busy CPU over the same time, and what processes outside the run
    (another job on the machine) took of it. ``since``: the machine's busy CPU and
    this process's CPU at the start."""
    busy = machine_busy_s() - since[0]
    harness = time.process_time() - since[1]
    return {
        "machine_busy_cpu_s": round(busy, 1),
        "machine_busy_cores": round(busy / max(system.wall_s, 1e-3), 2),
        "harness_cpu_s": round(harness, 1),
        "outside_cpu_s": round(busy - system.cpu_s - generator.cpu_s - harness, 1),
        "cpu_s": round(system.cpu_s, 1),
        "peak_pss_mb": round(system.peak_pss_mb, 1),
        "generator_cpu_s": round(generator.cpu_s, 1),
        "generator_peak_pss_mb": round(generator.peak_pss_mb, 1),
        "processes": system.processes(),
        "generator_processes": generator.processes(),
    }


def capacity(dep: Deployment, params: Params) -> dict[str, Any]:
    """The capacity steps, sent by the producer processes; each step scored on its own."""
    phases = phase_schedule(int(time.time() * 1000) + 5_000, params.warmup_s, params.rates,
                            params.step_s)  # fmt: skip
    since = machine_busy_s(), time.process_time()
    with Sampler(dep.system.pids()) as system:
        producers = start_producers(
            dep,
            params.producers,
            params.delay_s,
            "capacity",
            {"phases": [asdict(p) for p in phases]},
        )
        with Sampler([dep.receipts_pid, *(p.pid for p, _ in producers)]) as generator:
            edges = []
            for edge_ms in [phases[0].start_ms, *(phase.end_ms for phase in phases)]:
                while time.time() < edge_ms / 1000:
                    check_producers(producers)
                    time.sleep(min(1.0, max(0.0, edge_ms / 1000 - time.time())))
                edges.append(dep.cpu())
            reports = wait_producers(producers, 120)
            due: dict[str, dict[str, int]] = {}
            for phase in phases:
                due[phase.name] = {}
                for index, (_, out) in enumerate(producers):
                    array = np.load(f"{out}-{phase.name}.npy")
                    due[phase.name].update(
                        (f"{phase.name}-{index}-{n}", int(t)) for n, t in enumerate(array)
                    )
            everything = {k: t for found in due.values() for k, t in found.items()}
            dep.bench().wait_settled(everything, timeout_s=params.settle_s)
            edges.append(dep.cpu())
            settled_ms = int(time.time() * 1000)
    received = _received_sorted(dep.receipts)
    steps = []
    for at, phase in enumerate(phases):
        sent = sum(report[phase.name]["sent"] for report in reports)
        elapsed = max(report[phase.name]["elapsed_s"] for report in reports)
        scored = score(due[phase.name], dep.receipts).summary()
        achieved = sent / max(elapsed, 1e-3)
        clean = scored["lost"] == scored["duplicates"] == scored["early"] == 0
        p99 = scored["lateness_p99_ms"]
        fast = p99 is not None and p99 <= CAPACITY_P99_MS
        delivered = delivered_in(received, phase.start_ms, phase.end_ms)
        steps.append({"phase": phase.name, "rate": phase.rate, "achieved_rate": round(achieved, 1),
                      "generator_limited": achieved < 0.95 * phase.rate, **scored,
                      "good": achieved >= 0.95 * phase.rate and clean and fast,
                      "good_at_achieved": clean and fast,
                      "redis": _window(_cpu_between(edges[at], edges[at + 1]), delivered),
                      })  # fmt: skip
    total = len(received)
    scored_steps = [step for step in steps if step["phase"] != "warm"]
    return {
        "workload": "capacity",
        "params": {
            "rates": params.rates,
            "step_s": params.step_s,
            "warmup_s": params.warmup_s,
            "delay_s": list(params.delay_s),
            "settle_s": params.settle_s,
            "producers": params.producers,
            "p99_limit_ms": CAPACITY_P99_MS,
        },
        "capacity": max((s["rate"] for s in scored_steps if s["good"]), default=0.0),
        "capacity_achieved": max(
            (s["achieved_rate"] for s in scored_steps if s["good_at_achieved"]), default=0.0
        ),
        "steps": steps,
        "delivered": total,
        "redis": _window(_cpu_between(edges[0], edges[-1]), total),
        "settle": _window(
            _cpu_between(edges[-2], edges[-1]),
            delivered_in(received, phases[-1].end_ms, settled_ms + 1),
        ),
        **_processes(system, generator, since),
    }


def burst(dep: Deployment, params: Params) -> dict[str, Any]:
    """``params.burst`` messages due in one second; the drain from it to the last delivery."""
    started_ms = int(time.time() * 1000)
    second_ms = started_ms + int((params.head_start_s + params.burst / params.burst_rate) * 1000)
    since = machine_busy_s(), time.process_time()
    with Sampler(dep.system.pids()) as system:
        before = dep.cpu()
        load = {"burst": {"count": params.burst, "second_ms": second_ms}}
        producers = start_producers(dep, params.producers, params.delay_s, "burst", load)
        with Sampler([dep.receipts_pid, *(p.pid for p, _ in producers)]) as generator:
            reports = wait_producers(producers, 900)
        loaded_ms = int(time.time() * 1000)
        time.sleep(max(0.0, second_ms / 1000 - time.time()))
        at_due = dep.cpu()
        due = {f"burst-{n}": second_ms + n % 1000 for n in range(params.burst)}
        dep.bench().wait_settled(due, timeout_s=params.settle_s)
        after = dep.cpu()
    scored = score(due, dep.receipts)
    received = [dep.receipts.first[key] for key in due if key in dep.receipts.first]
    drained = len(received)
    return {
        "workload": "burst",
        "params": {
            "count": params.burst,
            "settle_s": params.settle_s,
            "producers": params.producers,
            "burst_rate": params.burst_rate,
        },
        **scored.summary(),
        "due_in_s": round((second_ms - started_ms) / 1000, 1),
        "produce_s": round(max(r["burst"]["produce_s"] for r in reports), 1),
        "loaded_before_due_s": round((second_ms - loaded_ms) / 1000, 1),
        "sent_after_due": sum(r["burst"]["sent_after_due"] for r in reports),
        "last_delivery_s": round((max(received) - second_ms) / 1000, 3) if received else None,
        "redis_load": _window(_cpu_between(before, at_due), drained),
        "redis_drain": _window(_cpu_between(at_due, after), drained),
        "redis": _window(_cpu_between(before, after), drained),
        **_processes(system, generator, since),
    }


def run_deployment(shards: str, params: Params, out: Path) -> dict[str, Any]:
    """Both workloads on deployment ``shards`` (``N`` or ``N@P``): one fresh deployment
    each (or one in all)."""
    chosen = [name for name in WORKLOADS if name in params.workloads]
    sessions = [chosen] if params.one_session else [[name] for name in chosen]
    found: dict[str, Any] = {"shards": shards}
    for session in sessions:
        with deployment(
            shards,
            params.topics_per_primary,
            out / "logs" / f"shards-{shards.replace('@', '-on-')}-{session[0]}",
        ) as dep:
            found.setdefault("start_s", []).append(dep.start_s)
            found["nodes"] = {node.name: node.port for node in dep.nodes}
            found["placement"] = dep.placement
            for name in session:
                print(f"[{shards} shard(s)] {name} ...", flush=True)
                began = time.monotonic()
                result = capacity(dep, params) if name == "capacity" else burst(dep, params)
                result["wall_s"] = round(time.monotonic() - began, 1)
                found[name] = result
                print(f"[{shards} shard(s)] {cluster_report.headline(result)}", flush=True)
    return found


def main(params: Params, out: Path, dry_run: bool = False) -> dict[str, Any]:
    """Every deployment in turn; the whole result, in ``out``/redis-cluster.json."""
    print(f"plan: shards {', '.join(params.shards)}; capacity "
          f"{', '.join(f'{r:,.0f}' for r in params.rates)} msg/s, {params.step_s:g} s steps "
          f"after {params.warmup_s:g} s; burst {params.burst:,}; {params.producers} producers; "
          f"workloads {', '.join(params.workloads)}; "
          f"estimated wall time {estimate_s(params) / 60:.1f} min", flush=True)  # fmt: skip
    if dry_run:
        return {}
    began = time.monotonic()
    results: dict[str, Any] = {}
    for shards in params.shards:
        try:
            results[shards] = run_deployment(shards, params, out)
        except Exception as exc:  # one deployment that fails leaves the others' results
            import traceback

            traceback.print_exc()
            results[shards] = {"shards": shards, "error": repr(exc)}
    whole = {
        "benchmark": "redis-cluster",
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} cpus",
        "cluster": "3 primaries, 1 replica each (LocalRedisCluster), AOF everysec, "
        "writes WAIT for a replica",
        "params": asdict(replace(params)),
        "deployments": results,
        "wall_s": round(time.monotonic() - began, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "redis-cluster.json").write_text(json.dumps(whole, indent=1) + "\n")
    print(cluster_report.table(whole), flush=True)
    return whole


def params_from(args: argparse.Namespace) -> Params:
    """The plan that ``python -m bench redis-cluster``'s options ask for. Raises
    ValueError for an unknown workload or a bad deployment."""
    chosen = QUICK if args.quick else FULL
    if args.shards:
        chosen = replace(chosen, shards=tuple(args.shards.split(",")))
        for spec in chosen.shards:
            parse_spec(spec)
    if args.rates:
        chosen = replace(chosen, rates=[float(rate) for rate in args.rates.split(",")])
    if args.producers:
        chosen = replace(chosen, producers=args.producers)
    if args.burst_rate:
        chosen = replace(chosen, burst_rate=args.burst_rate)
    if args.settle_s is not None:
        chosen = replace(chosen, settle_s=args.settle_s)
    if args.workloads:
        asked = tuple(args.workloads.split(","))
        if strange := sorted(set(asked) - set(WORKLOADS)):
            raise ValueError(f"unknown workloads: {', '.join(strange)}")
        chosen = replace(chosen, workloads=asked)
    return chosen


def run(params: Params, out: Path, dry_run: bool = False) -> int:
    """:func:`main`; 1 if a deployment failed."""
    whole = main(params, out, dry_run)
    return 1 if any("error" in found for found in whole.get("deployments", {}).values()) else 0
