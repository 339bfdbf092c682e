"""The source's cap on a batch's records follows the batches' time, on a real Redis
(delayline/scheduler/pipeline/admission.py)."""

from __future__ import annotations

import time

import redis
from pyspark.sql.streaming.datasource import ReadMaxRows

from delayline.redis import keys
from delayline.scheduler.pipeline.admission import FIRST_ROWS, LEAST_ROWS
from delayline.scheduler.pipeline.source import InboundReader
from delayline.scheduler.settings import SchedulerSettings


def admitted(raw: redis.Redis, start: dict[str, str], end: dict[str, str]) -> int:
    """How many inbound entries the batch ``(start, end]`` holds."""
    return len(raw.xrange(keys.INBOUND, f"({start['id']}", end["id"]))


def test_a_slow_batch_makes_the_next_smaller_and_a_fast_one_larger(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    pipe = raw_redis.pipeline(transaction=False)
    for n in range(40_000):
        pipe.xadd(keys.INBOUND, {"n": n})
    pipe.execute()
    settings = SchedulerSettings(redis_url=redis_url, max_batch_rows=50_000, batch_target_ms=1_000)
    reader = InboundReader(settings, run_token="run")
    limit = ReadMaxRows(settings.max_batch_rows)

    start = reader.initialOffset()
    first = reader.latestOffset(start, limit)
    time.sleep(1.5)  # the batch runs 1.5 times the target
    second = reader.latestOffset(first, limit)
    third = reader.latestOffset(second, limit)  # one that took no time at all
    assert admitted(raw_redis, start, first) == FIRST_ROWS, "a run starts below the most"
    rows = admitted(raw_redis, first, second)
    assert LEAST_ROWS <= rows <= FIRST_ROWS * 2 // 3, "after a slow batch, 2/3 at most"
    assert admitted(raw_redis, second, third) == 2 * rows, "after a fast one, twice as many"


def test_a_batch_of_all_there_was_leaves_the_cap_alone(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    settings = SchedulerSettings(redis_url=redis_url, batch_target_ms=500)
    reader = InboundReader(settings, run_token="run")
    limit = ReadMaxRows(settings.max_batch_rows)
    raw_redis.xadd(keys.INBOUND, {"n": 0})
    start = reader.initialOffset()
    first = reader.latestOffset(start, limit)
    time.sleep(2.0)  # slow, but the cap did not bind it: it says nothing about records
    pipe = raw_redis.pipeline(transaction=False)
    for n in range(FIRST_ROWS + 10):
        pipe.xadd(keys.INBOUND, {"n": n})
    pipe.execute()
    second = reader.latestOffset(first, limit)
    assert admitted(raw_redis, first, second) == FIRST_ROWS
