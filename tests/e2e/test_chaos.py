"""Chaos in CI: two SIGKILLs of the whole service and one Redis outage, under mixed load
(``python -m bench chaos`` runs three, with 1M pending)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from bench.chaos_scenario import ChaosPlan, run_chaos

from tests.support.harness import SchedulerProcess

pytestmark = pytest.mark.spark


def test_nothing_lost_doubled_or_early_through_kills_and_an_outage(tmp_path: Path) -> None:
    # A new seed each run, printed on failure (and settable to replay one).
    seed = int(os.environ.get("DELAYLINE_CHAOS_SEED", time.time_ns() % 1_000_000))
    report = run_chaos(tmp_path, ChaosPlan(seed=seed), SchedulerProcess, log=print)
    print(report)
    assert report.sent > 1_000, report
    assert report.cancelled > 10, report
    assert len(report.restarts_s) == 3
    assert report.outage.seconds >= 10.0
