"""One real local Spark session for the tests of the scheduling query, and a running
pump for those of the outbox."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import psutil
import pytest
from pyspark.sql import SparkSession

from delayline.scheduler.pump import Pump
from delayline.scheduler.runtime.session import build_session
from delayline.scheduler.settings import SchedulerSettings
from tests.support.processes import kill_processes

#: How long the driver JVM may take to exit once its gateway is closed (s).
JVM_EXIT_TIMEOUT_S = 30


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A session built as ``delayline run`` builds it, for the whole test session.

    Its settings' shape is the default one (two state partitions); Spark's
    output goes to ``spark.log`` in its directory. ``SparkSession.stop`` leaves
    PySpark's driver JVM running: it is shut down after the last test, and
    killed if it will not go.
    """
    data_dir = tmp_path_factory.mktemp("spark-session")
    session = build_session(SchedulerSettings(data_dir=data_dir), data_dir / "spark.log")
    gateway = session.sparkContext._gateway
    assert gateway is not None
    jvm = gateway.proc
    yield session
    session.stop()
    gateway.shutdown()
    # The JVM exits when its stdin closes (PySpark's way of tying it to this process).
    jvm.stdin.close()
    try:
        jvm.wait(JVM_EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_processes([psutil.Process(jvm.pid)])


@pytest.fixture
def pump(redis_url: str) -> Iterator[Pump]:
    """The scheduler's pump thread on the test's Redis; stopped, and checked gone, after."""
    running = Pump(redis_url, journal_ttl_s=3600)
    running.start()
    yield running
    running.stop()
    assert not running.alive
