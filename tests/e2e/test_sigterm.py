"""SIGTERM to the whole process group (``kill -TERM -- -PGID``) stops ``delayline run``
as cleanly as Ctrl-C does: the current batch finishes, exit 0, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from delayline import Client
from delayline.testing import free_port, wait_for
from tests.support.harness import SchedulerProcess

pytestmark = pytest.mark.spark


def assert_clean_stop(service: SchedulerProcess, code: int) -> None:
    assert code == 0, service.output[-3000:]
    assert service.output.splitlines()[-1] == "stopped"
    for sign in ("Traceback", "EOFError", "error:", "stopped answering"):
        assert sign not in service.output, service.output[-3000:]
    wait_for(lambda: not service.leftovers(), 30, "the scheduler's processes to exit")


def test_sigterm_to_the_group_lets_the_batch_finish_and_exits_0(tmp_path: Path) -> None:
    args = ["--redis-port", str(free_port()), "--no-api", "--data-dir", str(tmp_path / "data")]
    with SchedulerProcess(args) as service:
        with Client(service.embedded_url) as client:
            message_id = client.send("t", b"before the stop", delay=500)
            raw = redis.Redis.from_url(service.embedded_url)
            wait_for(lambda: raw.xlen("t") == 1, 30, "the delivery")
            raw.close()
            later = client.send("t", b"after the restart", delay=60_000)
        assert_clean_stop(service, service.terminate(timeout_s=60))
        assert "stopping: letting the current batch finish" in service.output
    # Nothing was lost: the next run still has the pending message.
    with SchedulerProcess(args) as service, Client(service.embedded_url) as client:
        assert client.status(message_id).state == "delivered"
        assert client.status(later).state == "pending"


def test_sigterm_while_spark_starts_stops_the_run_cleanly(tmp_path: Path) -> None:
    args = ["--redis-port", str(free_port()), "--no-api", "--data-dir", str(tmp_path / "data")]
    service = SchedulerProcess(args)
    try:
        process = service.launch()
        wait_for(
            lambda: "starting the scheduler" in service.output or process.poll() is not None,
            60,
            "Spark's start to begin",
        )
        assert_clean_stop(service, service.terminate(timeout_s=120))
    finally:
        service.stop_quietly()
