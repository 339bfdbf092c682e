"""SIGKILL the scheduler mid-run, twice; restart on the same data directory."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis

from delayline import Client
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import SMALL_WHEEL
from delayline.testing.streams import arrivals
from tests.support.harness import (
    TOPICS,
    SchedulerProcess,
    check_exactly_once,
    kill_at,
    pipeline_state,
    send_workload,
    settled,
    wait_for,
)

pytestmark = pytest.mark.spark


def test_exactly_once_across_two_kills(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path
) -> None:
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir), *SMALL_WHEEL]

    def state() -> str:
        return pipeline_state(own_raw, data_dir)

    with ExitStack() as runs:
        first = runs.enter_context(SchedulerProcess(args))
        workload = send_workload(own_redis.url, max_delay_ms=20_000)
        # Kill while deliveries are flowing and a batch is in flight, so that it
        # dies half written and the restart runs it again. (A kill between batches
        # is the next test's case.)
        wait_for(lambda: len(arrivals(own_raw, TOPICS)) >= 200, 60, "the first deliveries", [first])
        kill_at(first, data_dir, in_flight=True)
        delivered_before_restart = len(arrivals(own_raw, TOPICS))

        second = runs.enter_context(SchedulerProcess(args))
        wait_for(
            lambda: len(arrivals(own_raw, TOPICS)) >= delivered_before_restart + 200,
            90,
            "deliveries after the first restart",
            [first, second],
            details=state,
        )
        kill_at(second, data_dir, in_flight=True)

        third = runs.enter_context(SchedulerProcess(args))
        wait_for(
            lambda: settled(own_raw, workload),
            180,
            "every message to be settled",
            [first, second, third],
            details=state,
        )
        # Downtime makes messages late; what must hold is once, never early, none lost.
        check_exactly_once(own_raw, workload, max_late_ms=None)


def test_a_kill_between_batches_then_a_restart_delivers(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, data_dir: Path
) -> None:
    """A kill while no batch is in flight, with nothing new to read: the restart must deliver."""
    # A short horizon: the messages must wait in Spark's state, not in the outbox.
    args = ["--redis-url", own_redis.url, "--no-api", "--data-dir", str(data_dir)]
    args += ["--horizon-ms", "2000"]
    delay_ms = 20_000
    with ExitStack() as runs:
        first = runs.enter_context(SchedulerProcess(args))
        with Client(own_redis.url) as client:
            sent_at = time.monotonic()
            ids = {client.send("orders.timeout", b"m", delay=delay_ms) for _ in range(20)}
        # Spark trims a batch's input once it plans the next batch: then it is all in state.
        wait_for(lambda: own_raw.xlen(keys.INBOUND) == 0, 30, "the input to be committed", [first])
        kill_at(first, data_dir, in_flight=False)
        assert time.monotonic() - sent_at < delay_ms / 1000 - 5, "too slow: the slots had fired"
        assert own_raw.zcard(keys.OUTBOX) == 0
        assert own_raw.xlen("orders.timeout") == 0
        assert own_raw.xlen(keys.INBOUND) == 0  # nothing new for the restart to read

        second = runs.enter_context(SchedulerProcess(args))
        # Due by now or soon: a working restart delivers within a few batches of their time.
        deadline_s = max(delay_ms / 1000 - (time.monotonic() - sent_at), 0) + 20
        wait_for(
            lambda: own_raw.xlen("orders.timeout") == len(ids),
            deadline_s,
            "the overdue messages after the restart",
            [first, second],
            details=lambda: pipeline_state(own_raw, data_dir),
        )
        found = arrivals(own_raw, TOPICS)
        assert sorted(arrival.message_id for arrival in found) == sorted(ids)  # each once
        assert all(arrival.stream_ms >= arrival.deliver_at_ms for arrival in found), "early"
