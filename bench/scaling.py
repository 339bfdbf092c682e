"""``python -m bench scaling``: delayline's capacity and CPU on three Spark deployments.

The same capacity workload as ``bench run`` (steps of rising rate, delays 1-45 s),
for delayline only, on:

- ``local-cluster[1,1,1024]``: a driver and one executor JVM of one core;
- ``local-cluster[2,1,1024]``: a driver and two such executors;
- ``standalone``: the standalone cluster that ``delayline cluster up`` starts
  (a Master and two Workers of one core each), whose Master, Workers and
  executors are sampled with the rest.

Capacity exercises the fine wheel: its delays are within the horizon, so the
SDK puts each message straight into the outbox, and Redis bounds it. ``absorb``
exercises Spark: ABSORB_COUNT messages due 1-2 h ahead, sent as fast as the
SDK goes, pass through the source into the wheel's state on the executors;
its rate is how many a second the deployment takes in.

Capacity is the highest step with p99 <= 100 ms and nothing lost, duplicated or
early (bench/workloads.py). ``cpu_per_1k_msg_s`` is the CPU seconds of every
process (Redis, the scheduler, the cluster, the consumer) per 1,000 messages
delivered over the whole run, warm-up and settling included: the cores that
1,000 msg/s costs. The load generator shares the same 2 cores.
"""

from __future__ import annotations

import json
import tempfile
import time
import traceback
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import run_system
from bench.plans import STEADY_DELAY_S, Step, _capacity
from bench.systems.delayline_sys import DelaylineSystem
from bench.workloads import Bench
from delayline.scheduler.runtime import standalone
from delayline.testing import free_port

#: Each deployment's master; None: the standalone cluster started for the run.
DEPLOYMENTS: dict[str, str | None] = {
    "local-cluster-1": "local-cluster[1,1,1024]",
    "local-cluster-2": "local-cluster[2,1,1024]",
    "standalone-2": None,
}
#: State partitions: two per executor core of the largest deployment.
PARTITIONS = 4
#: Capacity steps (msg/s), each STEP_S long after WARMUP_S at the first rate.
RATES = [2_500.0, 5_000.0, 7_500.0, 10_000.0]
STEP_S, WARMUP_S = 20.0, 10.0
#: --quick: a smoke test of the three deployments.
QUICK_RATES, QUICK_STEP_S, QUICK_WARMUP_S = [200.0], 3.0, 1.0
QUICK_DELAYS_S = (1.0, 5.0)
#: Far-future messages the absorb step loads (QUICK_ABSORB_COUNT with --quick).
ABSORB_COUNT, QUICK_ABSORB_COUNT = 200_000, 5_000
#: The steps there are, in the order they run on one started deployment.
STEPS = ("capacity", "absorb")


#: What the summary keeps of each capacity step.
STEP_FIELDS = ("rate", "achieved_rate", "lateness_p50_ms", "lateness_p99_ms", "lost",
               "duplicates", "early", "good")  # fmt: skip


class DeployedDelayline(DelaylineSystem):
    """delayline run on one deployment; the cluster's own processes are sampled too."""

    def __init__(
        self,
        redis_url: str,
        receipts_url: str,
        workdir: Path,
        *,
        master: str,
        cluster_pids: Iterable[int] = (),
        inbound_shards: int = 1,
    ) -> None:
        super().__init__(redis_url, receipts_url, workdir)
        self.run_options = ("--master", master, "--partitions", str(PARTITIONS),
                            "--inbound-shards", str(inbound_shards))  # fmt: skip
        self.cluster_pids = list(cluster_pids)

    def pids(self) -> list[int]:
        return [*super().pids(), *self.cluster_pids]


def absorb(bench: Bench, *, count: int) -> dict[str, Any]:
    """Load ``count`` messages due 1-2 h ahead and wait until the scheduler took them
    in: Spark's share of the work, on its executors. The CPU counts the rest
    after the load too (workloads.REST_AFTER_LOAD_S)."""
    with bench.sampler() as sampler:
        loading = bench.ensure_pending(count)
    taken_s = loading["load_s"] + loading["absorb_s"]
    return {
        "system": bench.system.name,
        "workload": "absorb",
        **loading,
        "absorbed_per_s": round(count / max(taken_s, 1e-3), 1),
        "cpu_s": round(sampler.cpu_s, 1),
        "cpu_per_1k_msg_s": round(sampler.cpu_s / (count / 1000), 3),
        "peak_pss_mb": round(sampler.peak_pss_mb, 1),
    }


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """What docs/scaling.md quotes of one deployment's capacity result."""
    # The warm-up's messages are not scored, but cost CPU too: count them as sent.
    params = result["params"]
    warmup = round(params["rates"][0] * params["warmup_s"])
    delivered = warmup + sum(step["received"] for step in result["steps"])
    return {
        "capacity": result["capacity"],
        "capacity_achieved": result["capacity_achieved"],
        "cpu_s": result["cpu_s"],
        "delivered": delivered,
        "cpu_per_1k_msg_s": round(result["cpu_s"] / max(delivered / 1000, 1e-9), 3),
        "peak_pss_mb": result["peak_pss_mb"],
        "start_s": result["start_s"],
        "steps": [{key: step.get(key) for key in STEP_FIELDS} for step in result["steps"]],
    }


def measure(
    name: str,
    master: str | None,
    out: Path,
    rates: Sequence[float],
    step_s: float,
    warmup_s: float,
    delays_s: tuple[float, float],
    steps: Sequence[str] = STEPS,
    absorb_count: int = ABSORB_COUNT,
    inbound_shards: int = 1,
) -> dict[str, Any]:
    """Run ``steps`` on one deployment; their summaries."""
    cluster = None
    directory = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    try:
        if master is None:
            spec = standalone.ClusterSpec(
                directory / "cluster", port=free_port(), webui_port=free_port(), workers=2
            )
            cluster = standalone.up(spec)
            master = cluster.master_url
        factory = partial(
            DeployedDelayline,
            master=master,
            cluster_pids=cluster.pids.values() if cluster else (),
            inbound_shards=inbound_shards,
        )
        chosen = []
        if "capacity" in steps:
            chosen.append(_capacity(list(rates), step_s, warmup_s, delays_s, 20))
        if "absorb" in steps:
            run = partial(absorb, count=absorb_count)
            estimate = absorb_count / 10_000  # s, at a guessed 10,000 msg/s
            chosen.append(Step("absorb", "absorb", run, ("delayline",), "main", (0, 5),
                               lambda _: estimate, params={"count": absorb_count}))  # fmt: skip
        results = run_system(factory, chosen, out / name)
        found: dict[str, Any] = {"master": master}
        for result in results:
            found[result["workload"]] = (
                summary(result) if result["workload"] == "capacity" else result
            )
        return found
    finally:
        if cluster is not None:
            standalone.down(directory / "cluster")


def main(
    quick: bool,
    out: Path,
    deployments: Sequence[str],
    steps: Sequence[str] = STEPS,
    inbound_shards: int = 1,
) -> dict[str, Any]:
    """Every deployment in turn; the whole result (also written to ``out``/scaling.json)."""
    rates, step_s, warmup_s = (
        (QUICK_RATES, QUICK_STEP_S, QUICK_WARMUP_S) if quick else (RATES, STEP_S, WARMUP_S)
    )
    delays_s = QUICK_DELAYS_S if quick else (float(STEADY_DELAY_S[0]), float(STEADY_DELAY_S[1]))
    began = time.monotonic()
    results: dict[str, Any] = {}
    for name in deployments:
        try:
            results[name] = measure(
                name, DEPLOYMENTS[name], out, rates, step_s, warmup_s, delays_s, steps,
                QUICK_ABSORB_COUNT if quick else ABSORB_COUNT, inbound_shards,
            )  # fmt: skip
        except Exception as exc:  # one deployment that fails leaves the others' results
            traceback.print_exc()
            results[name] = {"error": repr(exc)}
    whole = {
        "quick": quick,
        "rates": list(rates),
        "step_s": step_s,
        "partitions": PARTITIONS,
        "steps": list(steps),
        "inbound_shards": inbound_shards,
        "deployments": results,
        "wall_s": round(time.monotonic() - began, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(whole, indent=2) + "\n")
    return whole
