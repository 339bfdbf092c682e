"""The same job on a multi-process Spark cluster: separate executor JVMs and workers."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from delayline.redis.embedded import EmbeddedRedis
from tests.e2e.harness import SchedulerProcess, check_exactly_once, send_workload, settled, wait_for

pytestmark = pytest.mark.spark


def test_exactly_once_on_a_local_cluster(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path
) -> None:
    args = [
        "--redis-url",
        own_redis.url,
        "--no-api",
        "--data-dir",
        str(data_dir),
        "--master",
        "local-cluster[2,1,1024]",
        "--partitions",
        "4",
    ]
    with SchedulerProcess(args) as process:
        assert "starting the scheduler on Spark local-cluster[2,1,1024]" in process.output
        workload = send_workload(own_redis.url, total=400, burst=100, malformed=5)
        wait_for(lambda: settled(own_raw, workload), 120, "every message to be settled", [process])
        # Looser than local mode's 10 s: two executor JVMs start their Python
        # workers in the first data batches, on 2 cores (a CI run measured 10.4 s).
        check_exactly_once(own_raw, workload, max_late_ms=30_000)
