"""Workload parameters: the full benchmark, and --quick (a smoke test under 3 minutes).

A plan maps a workload group to sessions; each session runs its workloads on a
fresh system with a fresh Redis, so that one workload's leftovers (pending
messages, a grown JVM heap) do not count against another's memory.
"""

from __future__ import annotations

from functools import partial

from bench import workloads
from bench.harness import Workload

#: The saturation steps of the full benchmark (msg/s).
SATURATION_RATES = [1_000.0, 2_000, 5_000, 7_500, 10_000, 15_000, 20_000, 25_000, 30_000]
#: Pending-message counts of the pending-heavy workload (the RSS-vs-pending plot).
PENDING_SIZES = [10_000, 100_000, 1_000_000]

Session = list[tuple[str, Workload]]


#: Pending messages while the recovery workload kills and restarts the system.
RECOVERY_PENDING = 1_000_000


def plan(
    quick: bool,
    rate: float,
    rates: list[float] | None = None,
    recovery_pending: int = RECOVERY_PENDING,
    pending_sizes: list[int] | None = None,
) -> dict[str, list[Session]]:
    """Workload group -> sessions. ``rate``: the steady rate; ``rates``: the saturation steps;
    ``recovery_pending``: the backlog of the recovery workload; ``pending_sizes``: those of
    pending-heavy.

    All four apply to the full benchmark only.
    """
    if quick:
        return {
            "steady": [[("steady", partial(workloads.steady, rate=100, duration_s=5,
                                           min_delay_s=1, max_delay_s=2))]],
            "burst": [[("burst", partial(workloads.burst, count=1_000, head_start_s=2,
                                         settle_s=20))]],
            "pending-heavy": [[("pending-heavy-1000", partial(
                workloads.pending_heavy, pending=1_000, rate=100, duration_s=4))]],
            "saturation": [[("saturation", partial(workloads.saturation, rates=[200.0],
                                                   step_s=4))]],
            "recovery": [[("recovery", partial(workloads.recovery, pending=1_000, rate=100,
                                               duration_s=4))]],
        }  # fmt: skip
    return {
        "steady": [[("steady", partial(workloads.steady, rate=rate, duration_s=60,
                                       min_delay_s=1, max_delay_s=30))]],
        "burst": [[("burst", partial(workloads.burst, count=50_000))]],
        "pending-heavy": [
            [(f"pending-heavy-{n}", partial(workloads.pending_heavy, pending=n, rate=1_000,
                                            duration_s=60))]
            for n in pending_sizes or PENDING_SIZES
        ],
        "saturation": [[("saturation", partial(workloads.saturation,
                                               rates=rates or SATURATION_RATES, step_s=30,
                                               warmup_s=20))]],
        "recovery": [[(f"recovery-{recovery_pending}", partial(
            workloads.recovery, pending=recovery_pending, rate=1_000, duration_s=60))]],
    }  # fmt: skip
