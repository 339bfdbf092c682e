"""The scheduler on a Spark standalone cluster, started by ``delayline cluster up``:
separate Worker and executor JVMs, one of which is killed under load; and the
entry point that spark-submit runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from delayline.redis.embedded import EmbeddedRedis
from delayline.scheduler.runtime import standalone
from delayline.scheduler.runtime.priority import SPARK_NICENESS
from delayline.testing import free_port
from tests.support.harness import (
    SchedulerProcess,
    check_exactly_once,
    send_workload,
    settled,
    stats_of,
    wait_for,
)
from tests.support.processes import session_nice

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[standalone.RunningCluster]:
    """A Master and two Workers of one core each, started as an operator would."""
    directory = tmp_path / "cluster"
    command = [sys.executable, "-m", "delayline", "cluster", "up", "--dir", str(directory),
               "--port", str(free_port()), "--webui-port", str(free_port())]  # fmt: skip
    try:
        subprocess.run(command, check=True, timeout=180)
        yield standalone.RunningCluster.recorded_in(directory)
    finally:
        if (directory / standalone.RECORD_FILE).exists():
            standalone.down(directory)


def delivered(raw: redis.Redis) -> int:
    return stats_of(raw).get("delivered", 0)


def test_spark_submit_runs_the_packaged_entry_point() -> None:
    # As spark-submit runs a Python application: its file's directory first on
    # sys.path, the driver's Python from spark.pyspark.driver.python.
    entry = subprocess.run(
        [sys.executable, "-m", "delayline", "entrypoint"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    driver = f"spark.pyspark.driver.python={sys.executable}"
    submit = [str(standalone.spark_home() / "bin" / "spark-submit"), "--master", "local[1]",
              "--conf", driver, entry, "levels"]  # fmt: skip
    completed = subprocess.run(submit, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.startswith("level  delay")


def test_exactly_once_on_a_standalone_cluster_that_loses_a_worker(
    cluster: standalone.RunningCluster,
    own_redis: EmbeddedRedis,
    own_raw: redis.Redis,
    data_dir: Path,
) -> None:
    assert cluster.state()["aliveworkers"] == 2
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir),
            "--master", cluster.master_url, "--partitions", "4",
            # A short horizon: most messages wait in the state, on the executors.
            "--horizon-ms", "1000",
            # Two inbound shards: the records of three messages in four go to their
            # shard's stream, a source partition of its own.
            "--inbound-shards", "2"]  # fmt: skip
    with SchedulerProcess(args) as process:
        assert f"starting the scheduler on Spark {cluster.master_url}" in process.output
        assert cluster.state()["coresused"] == 2, "the application runs on both Workers"
        # Redis and the pump get a core first: the Master, the Workers and so their
        # executors run niced, as a local driver's JVM does.
        jvms = [psutil.Process(pid) for pid in cluster.pids.values()]
        jvms += [child for jvm in jvms for child in jvm.children() if child.name() == "java"]
        assert len(jvms) == 3 + 2, "a Master, two Workers, an executor on each"
        assert {jvm.nice() for jvm in jvms} == {os.nice(0) + SPARK_NICENESS}
        # And their sessions as wholes, where the kernel ranks sessions as groups.
        assert {session_nice(jvm.pid) for jvm in jvms} == {SPARK_NICENESS}
        workload = send_workload(
            own_redis.url, total=600, max_delay_ms=20_000, burst=100, malformed=5, inbound_shards=2
        )
        wait_for(lambda: delivered(own_raw) >= 100, 60, "deliveries before the kill", [process])
        # The Worker goes, and its executor with it (it watches its Worker):
        # Spark runs that executor's tasks again on the other one.
        os.kill(cluster.pids["worker-1"], signal.SIGKILL)
        wait_for(
            lambda: cluster.state()["aliveworkers"] == 1, 90, "the Master to see it", [process]
        )
        wait_for(lambda: settled(own_raw, workload), 180, "every message to be settled", [process])
        # Looser than local mode's bound: after the kill, a batch waits for Spark
        # to notice the lost executor and run its tasks again.
        check_exactly_once(own_raw, workload, max_late_ms=60_000)
        assert delivered(own_raw) == len(workload.expected)
    # The kill hit a running executor, not an idle Worker.
    assert "Lost executor" in (data_dir / "spark.log").read_text(errors="replace")
