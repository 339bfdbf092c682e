"""SIGKILL the scheduler mid-run, twice; restart on the same data directory."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.e2e.harness import (
    SMALL_WHEEL,
    SchedulerProcess,
    arrivals,
    check_exactly_once,
    send_workload,
    settled,
    wait_for,
)

pytestmark = pytest.mark.spark


def test_exactly_once_across_two_kills(
    redis_url: str, data_dir: Path, raw_redis: redis.Redis
) -> None:
    args = ["--redis-url", redis_url, "--data-dir", str(data_dir), *SMALL_WHEEL]
    first = SchedulerProcess(args)
    first.start()
    try:
        workload = send_workload(redis_url, max_delay_ms=20_000)
        # Kill while deliveries are flowing, so batches die half written.
        wait_for(lambda: len(arrivals(raw_redis)) >= 200, 60, "the first deliveries", [first])
        first.kill()
        delivered_before_restart = len(arrivals(raw_redis))

        second = SchedulerProcess(args)
        second.start()
        wait_for(
            lambda: len(arrivals(raw_redis)) >= delivered_before_restart + 200,
            90,
            "deliveries after the first restart",
            [first, second],
        )
        second.kill()

        third = SchedulerProcess(args)
        third.start()
        wait_for(
            lambda: settled(raw_redis, workload),
            180,
            "every message to be settled",
            [first, second, third],
        )
        # Downtime makes messages late; what must hold is once, never early, none lost.
        check_exactly_once(raw_redis, workload, max_late_ms=None)
        third.stop_quietly()
    finally:
        first.stop_quietly()
