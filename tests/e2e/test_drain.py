"""``delayline drain``: new pinned settings for a running deployment, nothing lost.

A scheduler with 2 state partitions and 2 Redis shards is stopped with
messages pending in its state, some of them cancelled; the drain hands them to
the inbound stream and pumps the outboxes; a scheduler with 3 partitions and 3
shards, which the old checkpoint would refuse, delivers every one of them once,
none early, and none that was cancelled (whose cancel requests it finds in
their new shards, see tests/integration/test_shard_layout.py).
(That the drain trims what the old checkpoint committed is checked in
tests/integration/test_checkpoint_files.py: a running source trims its streams
between batches, so here they are trimmed already.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis

from delayline import Client
from delayline.redis.embedded import EmbeddedRedis
from delayline.scheduler.pinning import PINNED_FILE
from delayline.testing import SMALL_WHEEL
from delayline.testing.streams import arrivals, forecast_left, shard_layout
from tests.support.harness import (
    TOPICS,
    SchedulerProcess,
    check_exactly_once,
    pipeline_state,
    send_workload,
    settled,
    wait_for,
)

pytestmark = pytest.mark.spark


def forecast_total(raw: redis.Redis) -> int:
    """How many messages the forecast counts as pending, in all (its minutes' counters)."""
    minutes = forecast_left(raw).items()
    return sum(n for key, counts in minutes if not key.endswith(":s") for n in counts.values())


def test_a_drained_checkpoint_hands_every_message_to_one_with_new_settings(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path
) -> None:
    # The checkpoint as a URI: the drain reads and moves it through Hadoop, as on HDFS.
    located = ["--data-dir", str(data_dir), "--checkpoint", (data_dir / "checkpoint").as_uri()]
    args = ["--redis-url", own_redis.url, "--no-api", *located, *SMALL_WHEEL]
    drain = [sys.executable, "-m", "delayline", "drain", "--redis-url", own_redis.url, *located]
    with ExitStack() as runs:
        first = runs.enter_context(
            SchedulerProcess([*args, "--partitions", "2", "--inbound-shards", "2"])
        )
        # Due over the next 40 s: most wait in the state (coarse and fine slots) at the stop.
        workload = send_workload(own_redis.url, max_delay_ms=40_000, inbound_shards=2)
        # Two schedules with nothing in the outbox at the stop (the forecast is checked
        # below): one run in an hour, and a paused one.
        with Client(own_redis.url) as client:
            in_an_hour = int(own_raw.time()[0]) * 1000 + 3_600_000
            client.schedule("later", "drained.schedules", b"x", times=[in_an_hour])
            client.schedule("tick", "drained.schedules", b"x", every="2s", paused=True)
        wait_for(lambda: len(arrivals(own_raw, TOPICS)) >= 100, 60, "the first deliveries", [first])
        assert first.interrupt(60) == 0, first.output[-3000:]
        delivered_before = len(arrivals(own_raw, TOPICS))
        pending_before = forecast_total(own_raw)

        drained = subprocess.run(drain, capture_output=True, text=True, timeout=300)
        assert drained.returncode == 0, drained.stdout[-3000:] + drained.stderr[-3000:]
        count = int(drained.stdout.split("drained   ")[1].split()[0])
        assert "drained   2 recurring schedules" in drained.stdout
        # The drain's pumps delivered what waited in the outboxes.
        assert sum(own_raw.zcard(shard.outbox) for shard in shard_layout(own_raw)) == 0
        delivered_by_drain = len(arrivals(own_raw, TOPICS)) - delivered_before
        assert count + delivered_by_drain >= len(workload.expected) - delivered_before
        assert not (data_dir / "checkpoint").exists()
        [aside] = data_dir.glob("checkpoint.drained-*")
        pinned = json.loads((aside / PINNED_FILE).read_text())
        assert (pinned["state_partitions"], pinned["inbound_shards"]) == (2, 2)
        # Drained messages are not counted twice in the forecast; delivered ones leave it.
        assert forecast_total(own_raw) == pending_before - delivered_by_drain
        again = subprocess.run(drain, capture_output=True, text=True, timeout=300)
        assert again.returncode != 0
        assert "no checkpoint to drain" in again.stderr

        second = runs.enter_context(
            SchedulerProcess([*args, "--partitions", "3", "--inbound-shards", "3"])
        )
        wait_for(
            lambda: settled(own_raw, workload),
            120,
            "every message to be settled",
            [first, second],
            details=lambda: pipeline_state(own_raw, data_dir),
        )
        # The schedules came across, the paused one paused.
        with Client(own_redis.url) as client:
            listed = {s.name: s for s in client.schedules(topic="drained.schedules")}
            assert sorted(listed) == ["later", "tick"]
            assert listed["later"].next_run_ms == in_an_hour
            assert listed["tick"].state == "paused"
            # The run in an hour is counted ahead in the forecast once: the new checkpoint
            # took back what the drained one counted before it counted it again.
            assert client.pending(topic="drained.schedules").total == 1
            client.delete_schedule("later", "drained.schedules")
            client.delete_schedule("tick", "drained.schedules")
            wait_for(
                lambda: client.pending(topic="drained.schedules").total == 0,
                30,
                "the deleted schedule's run to leave the forecast",
                [second],
            )
        # The stop makes messages late; what must hold is once, never early, none lost.
        check_exactly_once(own_raw, workload, max_late_ms=None)
        pinned = json.loads((data_dir / PINNED_FILE).read_text())
        assert (pinned["state_partitions"], pinned["inbound_shards"]) == (3, 3)
