"""ListRequests against a real Redis: the outbox read in Lua, and the request protocol with
the scheduler's side (``ListRequests``) answering on a thread, as ``delayline run`` does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from delayline import Client, SchedulerError
from delayline.listing import ListRequest, PendingMessage
from delayline.model import Cancel, Message
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.scheduler.jobs.state_scan import inbound_row, listed, unsettled
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import now_ms
from tests.support.sinking import answer


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


def test_a_listing_merges_the_state_and_the_outbox_by_due_time(
    client: Client, redis_url: str
) -> None:
    near = [
        client.send("a", b"xy", delay=timedelta(seconds=30 + n), key=f"k{n % 2}") for n in range(4)
    ]
    client.send("b", b"z", delay=timedelta(seconds=45))  # after the first two of "a"
    held = PendingMessage("01STATE", "a", "k0", now_ms() + 30_500, 2, 7, "state")
    server = answer(redis_url, [held])
    progress: list[tuple[int, int]] = []
    rows = client.list_pending(topic="a", key="k0", on_progress=lambda *p: progress.append(p))
    server.join(5)
    assert [(r.id, r.where) for r in rows] == [
        (near[0], "outbox"),
        ("01STATE", "state"),
        (near[2], "outbox"),
    ]
    assert (rows[0].topic, rows[0].key, rows[0].body_bytes, rows[0].attempt) == ("a", "k0", 2, 1)
    assert server.asked == [ListRequest(topic="a", key="k0")]  # type: ignore[attr-defined]
    server = answer(redis_url, [])
    assert [r.id for r in client.list_pending(limit=2)] == near[:2]
    server.join(5)


def test_a_failed_scan_and_a_missing_scheduler_are_clear_errors(
    client: Client, redis_url: str, raw_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = answer(redis_url, [], error="the scan failed: disk on fire")
    with pytest.raises(SchedulerError, match="the listing failed: the scan failed: disk on fire"):
        client.list_pending()
    server.join(5)
    # The scheduler reported in, then stopped serving.
    monkeypatch.setattr("delayline.listing.PICKUP_TIMEOUT_S", 0.3)
    with pytest.raises(SchedulerError, match="is `delayline run` running against this Redis"):
        client.list_pending()
    raw_redis.delete(keys.HEARTBEAT)
    with pytest.raises(SchedulerError, match="no scheduler is running against this Redis"):
        client.cancel_key("orders", "42")
    # A scheduler whose query has just started beats before its first batch completes
    # (with a backlog, tens of seconds): it is taken to be running, and asked.
    DeliveryStore.from_url(redis_url).record_started()
    with pytest.raises(SchedulerError, match="is `delayline run` running against this Redis"):
        client.list_pending()
    with pytest.raises(ValueError, match="limit must be 1 to 10,000"):
        client.list_pending(limit=0)


def test_a_listing_reads_the_inbound_feeds_past_the_committed_batch(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    # A message sent a moment ago is on an inbound stream, not in the committed state:
    # a cancel by key must find it there.
    settings = SchedulerSettings(redis_url=redis_url, inbound_shards=2)
    limits = settings.limits

    def message(key: str) -> Message:
        return Message.create(
            "orders", b"x", now_ms=now_ms(), limits=limits, delay=600_000, key=key
        )

    committed, listed_ones, cancelled = message("42"), message("42"), message("42")
    other_key, in_shard = message("7"), message("42")
    done = raw_redis.xadd(keys.INBOUND, committed.to_record()).decode()
    for sent in (listed_ones, cancelled, other_key):
        raw_redis.xadd(keys.INBOUND, sent.to_record())
    raw_redis.xadd(keys.INBOUND, Cancel(cancelled.id, now_ms()).to_record())
    raw_redis.xadd(keys.inbound_shard(1), in_shard.to_record())
    raw_redis.xadd(keys.inbound_shard(1), {b"v": b"1", b"op": b"send"})  # a reject, not listed
    asked = ListRequest("orders", "42")
    records = unsettled(settings, {"id": done, "id.0": "0-0", "id.1": "0-0"}, asked)
    rows = [inbound_row(send) for send in listed(asked, records)]
    assert sorted(row.id for row in rows) == sorted([listed_ones.id, in_shard.id])
    assert {(row.where, row.key, row.body_bytes) for row in rows} == {("inbound", "42", 1)}
    # With no batch committed, everything on the feeds is unsettled.
    everything = listed(asked, unsettled(settings, {}, asked))
    assert len(everything) == 3
