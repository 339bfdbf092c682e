"""The scheduling query, built by ``start_query`` on a real local Spark in this process.

A small two-level wheel, so that an 8 s workload goes through both levels and
the outbox: messages due more than 6 s ahead start coarse and are handed down
3 s ahead, and fine slots fire 1 s ahead, into the outbox that the pump empties.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from delayline.errors import ConfigurationError
from delayline.scheduler.jobs.checkpoint_files import CheckpointFiles
from delayline.scheduler.pipeline.query import QUERY_NAME, start_query
from delayline.scheduler.pump import Pump
from delayline.scheduler.settings import SchedulerSettings
from tests.support.harness import Workload, check_exactly_once, send_workload, settled, wait_for

pytestmark = pytest.mark.spark

#: Time for a workload due within 8 s to be delivered, with a query's first batch (s).
SETTLE_TIMEOUT_S = 90


def small_wheel(redis_url: str, data_dir: Path) -> SchedulerSettings:
    return SchedulerSettings(
        redis_url=redis_url,
        data_dir=data_dir,
        coarse_after_ms=6_000,
        coarse_tick_ms=2_000,
        cascade_ahead_ms=3_000,
        horizon_ms=1_000,
        trigger_ms=200,
    )


@contextmanager
def running(spark: SparkSession, settings: SchedulerSettings) -> Iterator[StreamingQuery]:
    """The query and an outbox pump, as ``delayline run`` runs them; both stopped after."""
    pump = Pump(settings.redis_url, settings.journal_ttl_s)
    pump.start()
    try:
        query = start_query(spark, settings, run_token=uuid.uuid4().hex)
        try:
            yield query
        finally:
            query.stop()
    finally:
        pump.stop()


def settle_and_check(raw: redis.Redis, workload: Workload, query: StreamingQuery) -> None:
    """Wait until every message is delivered or dropped and every bad record rejected,
    then check that each arrived exactly once, none early."""
    wait_for(
        lambda: settled(raw, workload),
        SETTLE_TIMEOUT_S,
        "every message delivered or dropped, every bad record rejected",
        details=lambda: f"last progress: {query.lastProgress}\nerror: {query.exception()}",
    )
    check_exactly_once(raw, workload, max_late_ms=None)


def test_the_query_delivers_a_workload_exactly_once_through_both_wheels(
    spark: SparkSession, redis_url: str, tmp_path: Path
) -> None:
    workload = send_workload(redis_url, total=600, max_delay_ms=8_000, burst=100, malformed=11)
    with (
        running(spark, small_wheel(redis_url, tmp_path)) as query,
        closing(redis.Redis.from_url(redis_url)) as raw,
    ):
        assert query.name == QUERY_NAME
        settle_and_check(raw, workload, query)


def test_a_stopped_query_resumes_from_its_checkpoint_with_its_settings(
    spark: SparkSession, redis_url: str, tmp_path: Path
) -> None:
    settings = small_wheel(redis_url, tmp_path)
    early = send_workload(redis_url, total=200, max_delay_ms=8_000, burst=0, malformed=2, seed=1)
    with running(spark, settings) as first:
        # Stopped once it has taken the first records in, with most of them still pending.
        wait_for(lambda: first.lastProgress is not None, SETTLE_TIMEOUT_S, "the first batch")
        query_id = first.id
    late = send_workload(redis_url, total=200, max_delay_ms=5_000, burst=0, malformed=0, seed=2)
    with (
        running(spark, settings) as second,
        closing(redis.Redis.from_url(redis_url)) as raw,
    ):
        assert second.id == query_id  # the same query, resumed, not a new one
        both = dataclasses.replace(
            early,
            messages=early.messages | late.messages,
            cancelled=early.cancelled | late.cancelled,
        )
        settle_and_check(raw, both, second)
    with pytest.raises(ConfigurationError, match="shards 4 -> 8"):
        start_query(spark, dataclasses.replace(settings, shards=8), run_token="refused")
    # A drain that has begun and not finished (it was killed): no run until it has
    # (the runner asks before it starts the query).
    files = CheckpointFiles(spark, settings.checkpoint_location)
    files.refuse_if_draining()
    files.mark_draining("{}")
    with pytest.raises(ConfigurationError, match="run delayline drain again"):
        files.refuse_if_draining()
