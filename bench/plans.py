"""Workload parameters: the full benchmark, and --quick (a smoke test under 3 minutes)."""

from __future__ import annotations

import functools
from typing import Any

from bench import workloads
from bench.harness import Workload

#: The saturation steps of the full benchmark (msg/s).
SATURATION_RATES = [1_000.0, 2_000, 5_000, 10_000, 15_000, 20_000, 25_000, 30_000, 40_000]


def plan(quick: bool, rate: float, rates: list[float] | None = None) -> dict[str, Workload]:
    """Workload name -> runner. ``rate`` is the steady rate and ``rates`` the
    saturation steps (full mode)."""
    if quick:
        return {
            "steady": functools.partial(
                workloads.steady, rate=100, duration_s=8, min_delay_s=1, max_delay_s=4
            ),
            "burst": functools.partial(workloads.burst, count=2_000),
            "pending-heavy": functools.partial(
                workloads.pending_heavy, pending=5_000, rate=100, duration_s=6
            ),
            "saturation": functools.partial(workloads.saturation, rates=[200.0], step_s=5),
            "recovery": functools.partial(
                workloads.recovery, pending=5_000, rate=100, duration_s=8
            ),
        }
    return {
        "steady": functools.partial(
            workloads.steady, rate=rate, duration_s=60, min_delay_s=1, max_delay_s=30
        ),
        "burst": functools.partial(workloads.burst, count=50_000),
        "pending-heavy": functools.partial(
            workloads.pending_heavy, pending=1_000_000, rate=1_000, duration_s=60
        ),
        "saturation": functools.partial(
            workloads.saturation,
            rates=rates or SATURATION_RATES,
            step_s=30,
        ),
        "recovery": functools.partial(
            workloads.recovery, pending=1_000_000, rate=1_000, duration_s=60
        ),
    }


def describe(quick: bool, rate: float) -> dict[str, Any]:
    return {"mode": "quick" if quick else "full", "steady_rate": rate}
