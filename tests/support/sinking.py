"""Writing rows exactly as the scheduler's sink does, and counting sends as its source
does, for tests of what reads them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence

import redis

from delayline.ids import deliver_at_ms_of
from delayline.listing import SCHEDULES, ListRequest, PendingMessage
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.redis.list_requests import ListRequests
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver, Drop, SinkRow
from delayline.scheduler.pipeline.handoff import sort_inbound
from delayline.scheduler.settings import SchedulerSettings
from delayline.schedules.listed import ListedSchedule
from delayline.timing import now_ms


def sink(redis_url: str, *rows: SinkRow) -> None:
    """Write ``rows`` through the sink's own transport call, as one fresh batch."""
    store = DeliveryStore.from_url(redis_url)
    store.write_chunk(
        query_id="q",
        partition=0,
        batch_id=time.time_ns(),
        first_row=0,
        rows=list(rows),
        journal_ttl_s=3600,
    )
    store.close()


def delivered(
    message_id: str,
    topic: str = "t",
    body: bytes = b"x",
    attempt: int = 1,
    *,
    key: str = "",
    headers: str = "{}",
) -> Deliver:
    """A due message with the delivery time its id carries."""
    return Deliver(
        topic=topic,
        id=message_id,
        body=body,
        key=key,
        headers=headers,
        deliver_at_ms=deliver_at_ms_of(message_id),
        attempt=attempt,
    )


def count_inbound(redis_url: str) -> None:
    """Count the sends waiting in the inbound stream as the source does (the forecast's
    counts), as one fresh batch."""
    inbound = InboundStream.from_url(redis_url)
    batch = sort_inbound(inbound.read("0-0", "+"), SchedulerSettings())
    inbound.count_ingest("q", 0, time.time_ns(), batch.accepted, cancels=len(batch.cancels))
    inbound.close()


def dropped(message_id: str, topic: str = "t", deliver_at_ms: int | None = None) -> Drop:
    """A message that a cancel removed, as the scheduler emits it when its slot fires."""
    due_ms = deliver_at_ms_of(message_id) if deliver_at_ms is None else deliver_at_ms
    return Drop(topic, message_id, b"x", "", "{}", due_ms, 1)


def answer(
    redis_url: str,
    rows: Sequence[PendingMessage] | Sequence[ListedSchedule],
    error: str = "",
    *,
    requests: int = 1,
) -> threading.Thread:
    """The scheduler's side: take ``requests`` requests, one after the other, and answer
    each with those of ``rows`` it selects (pending messages, or schedules). It reports
    in first, as a running scheduler does: clients ask only a live one."""
    asked: list[ListRequest] = []
    beat = redis.Redis.from_url(redis_url)
    beat.hset(keys.HEARTBEAT, "updated_at_ms", now_ms())
    beat.close()

    def serve() -> None:
        listings = ListRequests.from_url(redis_url)
        for _ in range(requests):
            waiting = listings.next_request(timeout_s=10)
            assert waiting is not None
            listing_id, request = waiting
            asked.append(request)
            listings.report(listing_id, "scanning", 1, 2)
            if error:
                listings.fail(listing_id, error)
            else:
                listings.finish(listing_id, selected(request, rows))
        listings.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.asked = asked  # type: ignore[attr-defined]
    thread.start()
    return thread


def selected(
    request: ListRequest, rows: Sequence[PendingMessage] | Sequence[ListedSchedule]
) -> list[PendingMessage] | list[ListedSchedule]:
    """What a scan answers ``request`` with, of ``rows``: the first ``limit`` of what it
    selects, in the order given."""
    if request.kind == SCHEDULES:
        schedules = [row for row in rows if isinstance(row, ListedSchedule)]
        return [s for s in schedules if request.selects_schedule(s.topic, s.name)][: request.limit]
    messages = [row for row in rows if isinstance(row, PendingMessage)]
    return [m for m in messages if request.selects(m.topic, m.key, m.deliver_at_ms)]


@contextlib.contextmanager
def answering_every_listing(
    redis_url: str, rows: Sequence[PendingMessage] | Sequence[ListedSchedule] = ()
) -> Iterator[None]:
    """A stand-in for the scheduler's listing thread: every request gets those of
    ``rows`` it selects (none by default)."""
    stop = threading.Event()

    def serve() -> None:
        listings = ListRequests.from_url(redis_url)
        while not stop.is_set():
            waiting = listings.next_request(timeout_s=0.2)
            if waiting is not None:
                listings.finish(waiting[0], selected(waiting[1], rows))
        listings.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def pump_all(store: DeliveryStore, shards: int) -> int:
    """Pump every shard's outbox of a ``shards`` layout once, as the scheduler's pumps
    do, and write what that readied to the topics; how many it moved."""
    moved = 0
    for shard in keys.layout(shards):
        moved += store.pump(1_000, 3_600, shard=shard).moved
        store.flush_ready(shard, 3_600)
    return moved
