"""Listing recurring schedules on a real local Spark: the scheduling query commits
schedules and a message to its state, then the scan reads the schedule keys apart
from the message slots, and the SDK asks the scheduler's listing thread for them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from delayline import AsyncClient, Client, ScheduleNotFoundError, timing
from delayline.listing import SCHEDULES, ListRequest
from delayline.redis.list_requests import ListRequests
from delayline.scheduler.jobs.checkpoint_files import CheckpointFiles
from delayline.scheduler.jobs.state_scan import ListingServer, scan_schedules, scan_state
from delayline.scheduler.pipeline.query import start_query
from delayline.scheduler.settings import SchedulerSettings
from delayline.schedules.listed import ACTIVE, PAUSED, ListedSchedule
from tests.support.harness import wait_for

pytestmark = pytest.mark.spark

#: Time for the query's first batches to commit what was sent before it started (s).
COMMIT_TIMEOUT_S = 90
HOUR_MS = 3_600_000


@contextmanager
def listing_scheduler(spark: SparkSession, settings: SchedulerSettings) -> Iterator[None]:
    """The query and the listing thread, as ``delayline run`` runs them (no pump)."""
    query = start_query(spark, settings, run_token=uuid.uuid4().hex)
    server = ListingServer(spark, settings, ListRequests.from_url(settings.redis_url))
    server.start()
    try:
        yield
    finally:
        server.stop()
        query.stop()


def test_schedules_are_listed_from_their_keys_and_messages_from_theirs(
    spark: SparkSession, redis_url: str, tmp_path: Path
) -> None:
    settings = SchedulerSettings(redis_url=redis_url, data_dir=tmp_path, trigger_ms=200)
    # Hourly from half an hour ahead: no run comes within the test.
    anchor_ms = timing.now_ms() + HOUR_MS // 2
    with Client(redis_url) as client, listing_scheduler(spark, settings):
        for name in ("c", "a", "b"):
            client.schedule(name, "reports", b"r", every="1h", anchor=anchor_ms)
        client.schedule("z", "alerts", b"a", cron="0 9 * * *", tz="Europe/Paris", paused=True)
        far = client.send("orders", b"m", delay=timedelta(minutes=10))
        files = CheckpointFiles(spark, settings.checkpoint_location)

        def scanned(request: ListRequest) -> list[ListedSchedule]:
            batch_id = files.last_batch("commits")
            return scan_schedules(
                spark, files.location, request, "test", batch_id, timing.now_ms()
            ) if batch_id >= 0 else []  # fmt: skip

        everything = ListRequest(kind=SCHEDULES)
        wait_for(lambda: len(scanned(everything)) == 4, COMMIT_TIMEOUT_S, "the schedules")
        rows = scanned(everything)
        assert [(row.topic, row.name, row.state) for row in rows] == [
            ("alerts", "z", PAUSED),
            ("reports", "a", ACTIVE),
            ("reports", "b", ACTIVE),
            ("reports", "c", ACTIVE),
        ]
        assert rows[1].next_run_ms == anchor_ms
        assert (rows[1].runs, rows[1].last_run_ms, rows[1].definition.body) == (0, None, b"r")
        limited = scanned(ListRequest(kind=SCHEDULES, topic="reports", limit=2))
        assert [row.name for row in limited] == ["a", "b"]
        [one] = scanned(ListRequest(kind=SCHEDULES, topic="reports", name="b"))
        assert (one.name, one.version, one.definition) == ("b", rows[2].version, rows[2].definition)
        assert scanned(ListRequest(kind=SCHEDULES, topic="alerts", name="b")) == []
        # The message slots hold the message alone; the schedule keys are not read as packs.
        batch_id = files.last_batch("commits")
        messages = scan_state(spark, files.location, ListRequest(), "test", batch_id)
        assert [(row.id, row.where) for row in messages] == [(far, "state")]

        # Through the SDK and the scheduler's listing thread.
        assert [s.name for s in client.schedules(topic="reports")] == ["a", "b", "c"]
        assert [s.topic for s in client.schedules(limit=1)] == ["alerts"]
        shown = client.get_schedule("z", "alerts")
        assert (shown.state, shown.definition.paused) == (PAUSED, True)
        with pytest.raises(ScheduleNotFoundError, match="no schedule 'nope' of topic 'reports'"):
            client.get_schedule("nope", "reports")
        upcoming = client.next_runs("a", "reports", n=3)
        assert [timing.to_epoch_ms(run, "run") for run in upcoming] == [
            anchor_ms + k * HOUR_MS for k in range(3)
        ]
        assert all(run.utcoffset() == timedelta(0) for run in upcoming)
        assert [row.id for row in client.list_pending()] == [far]

        async def shown_async() -> ListedSchedule:
            async with AsyncClient(redis_url) as twin:
                return await twin.get_schedule("b", "reports")

        assert asyncio.run(shown_async()).version == rows[2].version
