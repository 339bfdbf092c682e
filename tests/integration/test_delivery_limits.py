"""Topics' delivery limits against a real server, with the pump thread running: a rate
delivers a herd at that rate, earliest due first; a spread spreads it past its due
time; neither is ever early, loses or doubles a message."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import closing

import redis

from delayline import Client
from delayline.forecast import Forecast
from delayline.ids import new_message_id
from delayline.limits import TopicLimit
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.scheduler.pump import Pump
from delayline.testing import wait_for
from delayline.timing import now_ms
from tests.support.sinking import pump_all


def send_herd(url: str, topic: str, count: int, due_ms: int) -> list[str]:
    with Client(url) as client:
        return client.send_many([{"topic": topic, "body": b"x", "deliver_at": due_ms}] * count)


def delivered(raw: redis.Redis, topic: str, count: int, within_s: float) -> list[dict[str, int]]:
    """The topic's entries once it holds ``count``: id (as its index in the order the
    test sent them is not known here, kept as the raw id), due and delivered ms."""
    wait_for(lambda: raw.xlen(topic) >= count, within_s, f"{count} deliveries to {topic}")
    return [
        {
            "id": f[b"id"],
            "deliver_at_ms": int(f[b"deliver_at_ms"]),
            "delivered_at_ms": int(f[b"delivered_at_ms"]),
        }
        for _, f in raw.xrange(topic)
    ]


def test_a_rate_delivers_a_herd_at_that_rate_earliest_due_first(
    redis_url: str, raw_redis: redis.Redis, pump: Pump
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("herd", rate_per_s=500)
    due_ms = now_ms() + 1_000
    herd = send_herd(redis_url, "herd", 1_500, due_ms)
    later = send_herd(redis_url, "herd", 100, due_ms + 100)
    entries = delivered(raw_redis, "herd", 1_600, 15)
    assert sorted(e["id"].decode() for e in entries) == sorted(herd + later)  # none lost or doubled
    assert all(e["delivered_at_ms"] >= e["deliver_at_ms"] for e in entries)  # none early
    dues = [e["deliver_at_ms"] for e in entries]
    assert dues == sorted(dues)  # earliest due first
    # 1,600 at 500 a second take 3.2 s: the last goes 3 s after the first or more
    # (the slots are fixed; a busy machine only makes the pump late), and no
    # second of Redis's clock holds more than its 500 slots, but for a late pump
    # call's: it sends the slots that passed meanwhile together, perhaps into the
    # next second.
    times = [e["delivered_at_ms"] for e in entries]
    assert 2_900 <= times[-1] - times[0] <= 5_000
    per_second = Counter(t // 1_000 for t in times)
    assert max(per_second.values()) <= 550, per_second
    assert raw_redis.zcard(keys.OUTBOX) == raw_redis.hlen(keys.OUTBOX_DATA) == 0


def test_a_spread_spreads_a_herd_past_its_due_time_and_never_before(
    redis_url: str, raw_redis: redis.Redis, pump: Pump
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("spread", spread="2s")
    due_ms = now_ms() + 500
    herd = send_herd(redis_url, "spread", 400, due_ms)
    entries = delivered(raw_redis, "spread", 400, 10)
    assert sorted(e["id"].decode() for e in entries) == sorted(herd)
    lateness = sorted(e["delivered_at_ms"] - due_ms for e in entries)
    assert lateness[0] >= 0
    assert lateness[-1] <= 2_000 + 500  # the spread, and a busy machine's pump
    # Spread evenly by id: about half go in each half of the window.
    late_half = sum(1 for late in lateness if late > 1_000)
    assert 120 <= late_half <= 280, lateness


def test_a_due_row_of_a_limited_topic_waits_for_the_pump(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("limited", rate_per_s=1)
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() - 5_000
    rows = [
        Deliver("limited", new_message_id(due_ms), b"x", "", "{}", due_ms, 1),
        Deliver("free", new_message_id(due_ms), b"x", "", "{}", due_ms, 1),
    ]
    store.write_chunk(
        query_id="q", partition=0, batch_id=0, first_row=0, rows=rows, journal_ttl_s=60
    )
    # The free topic's message goes at once; the limited one waits in the outbox,
    # and the pump delivers it at its topic's next free slot: the next second's.
    assert (raw_redis.xlen("free"), raw_redis.xlen("limited")) == (1, 0)
    assert raw_redis.zscore(keys.OUTBOX, rows[0].id) == due_ms
    pumped_ms = now_ms()
    wait_for(
        lambda: store.pump(100, 60) and raw_redis.xlen("limited") == 1,
        3,
        "the pump to deliver the limited topic's message",
        interval_s=0.01,
    )
    [(_, fields)] = raw_redis.xrange("limited")
    assert int(fields[b"delivered_at_ms"]) <= (pumped_ms // 1_000 + 2) * 1_000


def test_a_deleted_limit_lets_messages_go_at_their_time(
    redis_url: str, raw_redis: redis.Redis, pump: Pump
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("slow", rate_per_s=1, spread=1_000)
        client.set_topic_limit("other", spread=5)
        assert client.topic_limits() == [
            TopicLimit("other", None, 5),
            TopicLimit("slow", 1, 1_000),
        ]
        assert client.delete_topic_limit("slow")
        assert not client.delete_topic_limit("slow")
        assert client.topic_limits() == [TopicLimit("other", None, 5)]
    due_ms = now_ms() + 300
    herd = send_herd(redis_url, "slow", 50, due_ms)
    entries = delivered(raw_redis, "slow", 50, 5)
    assert sorted(e["id"].decode() for e in entries) == sorted(herd)
    assert max(e["delivered_at_ms"] - due_ms for e in entries) < 200


def test_the_forecast_counts_a_held_message_when_it_will_go(
    redis_url: str, raw_redis: redis.Redis, pump: Pump
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("herd", rate_per_s=10)
        due_ms = now_ms() + 300
        herd = send_herd(redis_url, "herd", 1_300, due_ms)

        def consistent(pending: int = len(herd)) -> Forecast | None:
            # The pump delivers between the two reads: read until they agree.
            forecast = client.pending(hot_over=20)
            delivered = raw_redis.xlen("herd")
            return forecast if forecast.total + delivered == pending else None

        # Held at 10 a second, the herd goes over 130 s: the forecast shows it in
        # the minutes it will go in, and no second with more than its 10.
        def spread() -> Forecast | None:
            forecast = consistent()
            return forecast if forecast and len(forecast.buckets) >= 3 else None

        forecast = wait_for(spread, 10, "the forecast to show the herd spread")
        assert forecast.hot == []
        assert all(bucket.count > 0 for bucket in forecast.buckets)
        assert client.cancel(herd[-1])
        wait_for(lambda: consistent(len(herd) - 1), 10, "the cancel in the forecast")


def test_a_held_message_cancelled_leaves_nothing_in_the_forecast(
    redis_url: str, raw_redis: redis.Redis, pump: Pump
) -> None:
    with Client(redis_url) as client:
        client.set_topic_limit("herd", rate_per_s=2)
        herd = send_herd(redis_url, "herd", 6, now_ms() + 300)
        wait_for(lambda: raw_redis.xlen("herd") >= 1, 5, "the first delivery")
        assert client.cancel(max(herd))  # held until its slot, two or so seconds on
        wait_for(lambda: raw_redis.zcard(keys.OUTBOX) == 0, 10, "the herd to go", interval_s=0.05)
        assert raw_redis.xlen("herd") == 5
        # Counted where it was held until, and taken from its due time by the cancel:
        # both are put right when it is dropped.
        assert client.pending().buckets == []


def test_each_shard_keeps_its_share_of_the_rate_and_applies_it(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    shards = 2
    raw_redis.hset(keys.CONFIG, mapping={"inbound_shards": shards, "horizon_ms": 60_000})
    with Client(redis_url) as client, closing(DeliveryStore.from_url(redis_url)) as store:
        client.set_topic_limit("herd", rate_per_s=4)
        for shard in keys.read_layout(shards):
            stored = json.loads(raw_redis.hget(shard.limits, "herd") or b"{}")
            assert (stored["rate_per_s"], stored["shard_rate_per_s"]) == (4, 2)
        assert client.topic_limits() == [TopicLimit("herd", 4)]
        due_ms = now_ms() + 200
        herd = send_herd(redis_url, "herd", 12, due_ms)
        started_ms = now_ms()
        wait_for(
            lambda: pump_all(store, shards) >= 0 and raw_redis.xlen("herd") == len(herd),
            10,
            "the shards' pumps to deliver the herd",
            interval_s=0.01,
        )
        # 12 at 4 a second (2 a shard) take about 3 s; each shard's own count
        # never goes past its 2 a second.
        entries = delivered(raw_redis, "herd", len(herd), 1)
        times = sorted(e["delivered_at_ms"] for e in entries)
        assert times[-1] - max(due_ms, started_ms) >= 2_000
        for shard in keys.layout(shards):
            mine = [
                e["delivered_at_ms"] // 1_000
                for e in entries
                if keys.keys_of(e["id"].decode(), shards) == shard
            ]
            assert max(Counter(mine).values()) <= 2, (shard, mine)
