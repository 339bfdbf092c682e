"""The same job on a multi-process Spark cluster: separate executor JVMs and workers."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.e2e.harness import SchedulerProcess, check_exactly_once, send_workload, settled, wait_for

pytestmark = pytest.mark.spark


def test_exactly_once_on_a_local_cluster(
    redis_url: str, data_dir: Path, raw_redis: redis.Redis
) -> None:
    process = SchedulerProcess(
        [
            "--redis-url",
            redis_url,
            "--data-dir",
            str(data_dir),
            "--master",
            "local-cluster[2,1,1024]",
            "--partitions",
            "4",
        ]
    )
    process.start()
    try:
        assert "starting the scheduler on Spark local-cluster[2,1,1024]" in process.output
        workload = send_workload(redis_url, total=400, burst=100, malformed=5)
        wait_for(lambda: settled(raw_redis, workload), 120, "every message to be settled")
        check_exactly_once(raw_redis, workload, max_late_ms=10_000)
    finally:
        process.stop_quietly()
