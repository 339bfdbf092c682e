"""The forecast's counters against a real Redis: every path that accepts or settles a
message changes them once, through the same transport calls the scheduler makes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from delayline import Client
from delayline.errors import ValidationError
from delayline.forecast import Forecast
from delayline.ids import new_message_id
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.testing import wait_for
from delayline.timing import format_time, from_epoch_ms, now_ms
from tests.support.sinking import dropped, sink


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as sdk:
        yield sdk


@pytest.fixture
def inbound(redis_url: str) -> Iterator[InboundStream]:
    stream = InboundStream.from_url(redis_url)
    yield stream
    stream.close()


def counts(forecast: Forecast) -> dict[str, int]:
    """Pending per topic over the whole forecast."""
    topics: dict[str, int] = {}
    for bucket in forecast.buckets:
        for topic, n in bucket.topics.items():
            topics[topic] = topics.get(topic, 0) + n
    return topics


def pump_all(redis_url: str, raw: redis.Redis) -> None:
    store = DeliveryStore.from_url(redis_url)
    try:

        def drained() -> bool:
            store.pump(1_000, journal_ttl_s=3600)
            return raw.zcard(keys.OUTBOX) == 0

        wait_for(drained, 15, "the outbox to drain", interval_s=0.05)
    finally:
        store.close()


def test_near_sends_cancels_and_deliveries_keep_the_forecast_exact(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    sent = client.send_many(
        [
            {"topic": "a", "body": "1", "delay": timedelta(seconds=1)},
            {"topic": "a", "body": "2", "delay": timedelta(seconds=1)},
            {"topic": "b", "body": "3", "delay": timedelta(seconds=1)},
        ]
    )
    assert raw_redis.zcard(keys.OUTBOX) == 3  # the near path
    before = client.pending()
    assert (before.total, counts(before)) == (3, {"a": 2, "b": 1})
    assert client.cancel(sent[0])
    assert client.cancel(sent[0])  # a second cancel changes nothing
    after_cancel = client.pending()
    # The total drops at once; a cancel by id does not name its topic, so the topic's
    # count waits until the message is dropped.
    assert after_cancel.total == 2
    assert client.pending(topic="b").total == 1
    pump_all(redis_url, raw_redis)
    assert (raw_redis.xlen("a"), raw_redis.xlen("b")) == (1, 1)
    settled = client.pending()
    assert (settled.total, settled.buckets, counts(settled)) == (0, [], {})
    assert not client.cancel(sent[1])  # delivered already: nothing to take away
    assert client.pending().total == 0


def test_ingest_and_sink_paths_count_each_copy_once(
    client: Client, redis_url: str, inbound: InboundStream
) -> None:
    due_ms = now_ms() - 1_000  # due already: the sink delivers rather than waits
    second_ms = due_ms - due_ms % 1000
    first, cancelled = new_message_id(due_ms), new_message_id(due_ms)
    # Five copies of three sends (a producer retried two) in two batches; batch 1 replayed.
    inbound.count_ingest("q", 0, 1, accepted={(second_ms, "orders"): 3}, cancels=0)
    inbound.count_ingest("q", 0, 1, accepted={(second_ms, "orders"): 3}, cancels=0)
    inbound.count_ingest("q", 0, 2, accepted={(second_ms, "orders"): 2}, cancels=1)
    assert client.pending().total == 5
    # A raw cancel as the source records it: out of the total at once.
    inbound.record_cancel_requests([(cancelled, due_ms, "")], retention_ms=60_000)
    inbound.record_cancel_requests([(cancelled, due_ms, "")], retention_ms=60_000)  # replayed
    assert client.pending().total == 4
    assert counts(client.pending()) == {"orders": 5}

    def row(message_id: str) -> Deliver:
        return Deliver("orders", message_id, b"x", "", "{}", due_ms, 1)

    # The slot fires: the cancelled one is dropped, the others go out, a copy is a duplicate.
    sink(
        redis_url,
        dropped(cancelled, "orders", due_ms),
        row(first),
        row(first),
        row(new_message_id(due_ms)),
    )
    assert (client.pending().total, counts(client.pending())) == (1, {"orders": 1})
    sink(redis_url, dropped(cancelled, "orders", due_ms))  # a copy of the cancelled one
    assert client.pending().total == 0
    assert client.metrics().counters["duplicates"] == 2


def test_buckets_windows_and_hot_instants(
    client: Client, inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    hour_ms = (now_ms() // 3_600_000 + 2) * 3_600_000
    inbound.count_ingest(
        "q",
        0,
        1,
        accepted={
            (hour_ms + 5_000, "a"): 1_500,  # a thundering herd in one second
            (hour_ms + 6_000, "b"): 10,
            (hour_ms + 61_000, "a"): 7,  # the next minute
            (hour_ms + 3_600_000, "a"): 1,  # the next hour
        },
        cancels=0,
    )
    by_minute = client.pending()
    assert [(b.start_ms - hour_ms, b.count) for b in by_minute.buckets] == [
        (0, 1_510),
        (60_000, 7),
        (3_600_000, 1),
    ]
    assert by_minute.buckets[0].topics == {"a": 1_500, "b": 10}
    assert [(h.at_ms - hour_ms, h.count) for h in by_minute.hot] == [(5_000, 1_500)]
    assert client.pending(hot_over=1_500).hot == []
    by_hour = client.pending(by="hour", topic="a")
    assert [(b.start_ms - hour_ms, b.count, b.topics) for b in by_hour.buckets] == [
        (0, 1_507, {"a": 1_507}),
        (3_600_000, 1, {"a": 1}),
    ]
    window = client.pending(
        start=from_epoch_ms(hour_ms + 60_000), end=from_epoch_ms(hour_ms + 120_000)
    )
    assert (window.total, window.hot) == (7, [])
    assert client.pending(by="day").total == 1_518
    document = client.pending(by="hour").to_json()
    assert document["total"] == 1_518
    assert document["buckets"][0] == {  # type: ignore[index]
        "start": format_time(hour_ms),
        "count": 1_517,
        "topics": {"a": 1_507, "b": 10},
    }
    # Memory is per minute, not per message: two hashes per minute counted.
    assert raw_redis.zcard(keys.FORECAST_INDEX) == 3


def test_bad_forecast_arguments_are_refused(client: Client) -> None:
    with pytest.raises(ValidationError, match="by must be one of minute, hour, day"):
        client.pending(by="week")
    with pytest.raises(ValidationError, match="timezone-aware"):
        client.pending(start=datetime(2030, 1, 1))
    now = datetime.now(UTC)
    with pytest.raises(ValidationError, match="must come after its start"):
        client.pending(start=now, end=now)


def test_a_cancel_for_a_message_in_the_outbox_and_a_drop_count_once(
    client: Client, redis_url: str, raw_redis: redis.Redis
) -> None:
    [message_id] = client.send_many([{"topic": "t", "body": "x", "delay": timedelta(seconds=1)}])
    assert client.cancel(message_id)
    assert client.pending().total == 0
    # The slot fires while the pump also holds it: one drop, one duplicate.
    sink(redis_url, dropped(message_id))
    pump_all(redis_url, raw_redis)
    assert (client.pending().total, counts(client.pending())) == (0, {})
