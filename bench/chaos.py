"""``python -m bench chaos``: the chaos scenario of the CI test, long and with a big backlog.

The scenario (:mod:`bench.chaos_scenario`, which ``tests/e2e/test_chaos.py`` runs
small) with three SIGKILLs of the whole service (the CI test has two), one Redis
outage, every kind of producer and cancel, with about 100,000 messages through it
and 1,000,000 pending in an hour. It writes what it measured to
``bench/results/chaos.json``: counts, restart times, the outage's AOF size and load
time, and the largest lateness. A guarantee that breaks raises, naming the seed.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.chaos_scenario import ChaosPlan, run_chaos
from bench.systems.processes import kill_group, spawn, wait_for_log

#: The long run: about 1,500 msg/s through every door; 100k messages; 1M pending.
LONG: dict[str, Any] = {"batch": 100, "messages": 100_000, "pending": 1_000_000, "outage_s": 60.0,
        "calm_s": (20.0, 40.0), "burst": 20_000, "kills": 3}  # fmt: skip
#: --quick: the CI size, to check the command itself (about 3 minutes). The long
#: run takes about 7 minutes on 2 cores.
QUICK: dict[str, Any] = {}
#: Spark's cold start on 2 cores, plus a restart's first batch with 1M pending (s).
START_TIMEOUT_S = 300.0


class DelaylineRun:
    """``python -m delayline run`` in its own process group, its output in ``log``
    (a :class:`bench.chaos_scenario.Run`). PySpark's daemons, which leave the group,
    exit by themselves within about a second of their JVM's death."""

    def __init__(self, args: Sequence[str], log: Path) -> None:
        self.args = [sys.executable, "-m", "delayline", "run", *args]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self) -> None:
        self.process = spawn(self.args, env=dict(os.environ), log=self.log)
        try:
            wait_for_log(self.log, "scheduler running", START_TIMEOUT_S, self.process)
        except BaseException:
            self.stop_quietly()
            raise

    def kill(self) -> None:
        assert self.process is not None, "kill before start"
        kill_group(self.process)

    def stop_quietly(self) -> None:
        if self.process is not None:
            kill_group(self.process)


def main(
    *, quick: bool, seed: int | None, messages: int | None, pending: int | None
) -> dict[str, object]:
    """Run the scenario; returns the plan, the report and the duration (s)."""
    options = dict(QUICK if quick else LONG)
    if messages is not None:
        options["messages"] = messages
    if pending is not None:
        options["pending"] = pending
    chosen_seed = seed if seed is not None else time.time_ns() % 1_000_000
    plan = ChaosPlan(seed=chosen_seed, **options)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="delayline-chaos-") as tmp:
        logs = Path(tmp) / "logs"
        runs = 0

        def launch(args: Sequence[str]) -> DelaylineRun:
            nonlocal runs
            runs += 1
            return DelaylineRun(args, logs / f"run-{runs}.log")

        report = run_chaos(Path(tmp), plan, launch, log=lambda line: print(line, flush=True))
    return {
        "plan": dataclasses.asdict(plan),
        "report": dataclasses.asdict(report),
        "duration_s": round(time.monotonic() - started, 1),
        "command": "python -m bench chaos" + (" --quick" if quick else ""),
    }
