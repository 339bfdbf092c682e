"""``python -m bench chaos``: the chaos scenario of the CI test, long and with a big backlog.

The scenario of ``tests/e2e/test_chaos.py`` with three SIGKILLs of the whole
service (the CI test has two), one Redis outage, every kind of producer and cancel), with about
100,000 messages through it and 1,000,000 pending in an hour. It writes what it
measured to ``bench/results/chaos.json``: counts, restart times, the outage's
AOF size and load time, and the largest lateness. A guarantee that breaks
raises, naming the seed.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from tests.e2e.chaos import ChaosPlan, run_chaos

#: The long run: about 1,500 msg/s through every door; 100k messages; 1M pending.
LONG = {"batch": 100, "messages": 100_000, "pending": 1_000_000, "outage_s": 60.0,
        "calm_s": (20.0, 40.0), "burst": 20_000, "kills": 3}  # fmt: skip
#: --quick: the CI size, to check the command itself (about 3 minutes). The long
#: run takes about 7 minutes on 2 cores.
QUICK: dict[str, object] = {}


def main(
    *, quick: bool, seed: int | None, messages: int | None, pending: int | None
) -> dict[str, object]:
    """Run the scenario; returns the plan, the report and the duration."""
    options = dict(QUICK if quick else LONG)
    if messages is not None:
        options["messages"] = messages
    if pending is not None:
        options["pending"] = pending
    chosen_seed = seed if seed is not None else time.time_ns() % 1_000_000
    plan = ChaosPlan(seed=chosen_seed, **options)  # type: ignore[arg-type]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="delayline-chaos-") as tmp:
        report = run_chaos(Path(tmp), plan, log=lambda line: print(line, flush=True))
    return {
        "plan": dataclasses.asdict(plan),
        "report": dataclasses.asdict(report),
        "duration_s": round(time.monotonic() - started, 1),
        "command": "python -m bench chaos" + (" --quick" if quick else ""),
    }
