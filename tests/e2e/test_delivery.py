"""The scheduler end to end: real Redis, real local Spark, the standard workload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import SMALL_WHEEL
from tests.support.harness import (
    SchedulerProcess,
    check_exactly_once,
    send_workload,
    settled,
    wait_for,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def scheduler(own_redis: EmbeddedRedis, data_dir: Path) -> Iterator[SchedulerProcess]:
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir), *SMALL_WHEEL]
    with SchedulerProcess(args) as process:
        yield process


def test_every_message_exactly_once_none_early_none_cancelled(
    scheduler: SchedulerProcess, own_raw: redis.Redis, data_dir: Path
) -> None:
    workload = send_workload(scheduler_url(scheduler))
    wait_for(lambda: settled(own_raw, workload), 120, "every message to be settled", [scheduler])
    # Generous: timing precision belongs to the benchmarks, not to this test.
    check_exactly_once(own_raw, workload, max_late_ms=10_000)
    # Spark commits a batch's source range when it plans the next batch: poll.
    wait_for(
        lambda: own_raw.xlen("delayline:inbound") == 0,
        30,
        "the committed input to be trimmed",
        [scheduler],
    )
    stats = {k.decode(): int(v) for k, v in own_raw.hgetall("delayline:stats").items()}
    assert stats["accepted"] == len(workload.messages)
    assert stats["cancels"] == len(workload.cancelled)
    assert stats["dropped"] == len(workload.cancelled)
    assert stats["cascaded"] > 500  # far messages went through the coarse level
    assert "pending 0" in scheduler.output or wait_for_line(scheduler, "pending 0")
    # State snapshots reach the checkpoint, so a restart replays only the changelogs
    # after the last one (a raw local FileSystem once made every upload fail).
    state = data_dir / "checkpoint" / "state"
    wait_for(lambda: any(state.rglob("*.zip")), 90, "a state snapshot upload", [scheduler])
    assert "snapshot maintenance" not in scheduler.output


def scheduler_url(process: SchedulerProcess) -> str:
    return process.args[process.args.index("--redis-url") + 1]


def wait_for_line(process: SchedulerProcess, text: str) -> bool:
    wait_for(lambda: text in process.output, 15, f"a progress line with {text!r}")
    return True
