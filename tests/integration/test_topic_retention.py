"""Bounded topic streams, rejects and DLQs, against a real Redis.

A topic stream loses an entry only once its retention lets it go and every
consumer group has read and acknowledged it, unless a hard cap says otherwise,
and then the loss is counted.
"""

from __future__ import annotations

import redis

from delayline.client import Client
from delayline.ids import new_message_id
from delayline.redis import keys
from delayline.redis.retention import TopicStreams
from delayline.redis.scripts import TRIM_BATCH
from delayline.redis.store import DeliveryStore
from delayline.retention import RetentionPolicy, TopicRetention
from delayline.rows import Deliver
from delayline.scheduler.runtime.trimmer import Trimmer
from delayline.timing import now_ms


def fill(raw: redis.Redis, topic: str, count: int, *, first_ms: int | None = None) -> list[bytes]:
    """``count`` entries in ``topic``, 1 ms apart from ``first_ms`` (or now); their ids."""
    pipe = raw.pipeline(transaction=False)
    for n in range(count):
        pipe.xadd(topic, {"n": n}, id="*" if first_ms is None else f"{first_ms + n}-0")
    return [entry_id for entry_id in pipe.execute()]


def stats(raw: redis.Redis) -> dict[bytes, bytes]:
    return raw.hgetall(keys.STATS)


def trim_fully(streams: TopicStreams, topic: str, retention: TopicRetention) -> int:
    needed = streams.first_needed(topic)
    removed = 0
    while True:
        trimmed = streams.trim(topic, retention, needed)
        removed += trimmed.removed
        if not trimmed.more:
            return removed


#: Entries in a stream node: Redis's stream-node-max-entries, which these small
#: entries reach before its byte bound. Trims remove whole nodes.
NODE = 100


def test_without_groups_a_topic_keeps_about_its_newest_max_len(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    ids = fill(raw_redis, "t", 2_550)
    streams = TopicStreams.from_url(redis_url)
    removed = trim_fully(streams, "t", TopicRetention(0, 1_000, 0))
    # Never fewer than the newest 1,000; at most a node more.
    assert 1_550 - NODE < removed <= 1_550
    assert [entry for entry, _ in raw_redis.xrange("t")] == ids[removed:]
    assert stats(raw_redis)[b"topic_trimmed"] == str(removed).encode()
    assert b"topic_trimmed_unread" not in stats(raw_redis)


def test_entries_older_than_the_max_age_go_and_newer_ones_stay(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    old = fill(raw_redis, "t", 3 * NODE, first_ms=now_ms() - 3_600_000)
    new = fill(raw_redis, "t", 20)
    streams = TopicStreams.from_url(redis_url)
    assert trim_fully(streams, "t", TopicRetention(60_000, 0, 0)) == len(old)
    assert [entry for entry, _ in raw_redis.xrange("t")] == new


def test_an_entry_a_group_has_not_read_or_acknowledged_stays(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    ids = fill(raw_redis, "t", 10 * NODE, first_ms=now_ms() - 3_600_000)
    raw_redis.xgroup_create("t", "fast", id="0")
    raw_redis.xgroup_create("t", "slow", id="0")
    read = raw_redis.xreadgroup("fast", "c", {"t": ">"}, count=1_000)
    raw_redis.xack("t", "fast", *(entry for entry, _ in read[0][1]))
    # The slow group read 600 and acknowledged all but the 401st.
    slow = [entry for entry, _ in raw_redis.xreadgroup("slow", "c", {"t": ">"}, count=600)[0][1]]
    raw_redis.xack("t", "slow", *slow[:400], *slow[401:])
    streams = TopicStreams.from_url(redis_url)
    assert streams.first_needed("t") == ids[400].decode()
    # Every entry is past both bounds, but the one the slow group needs stays,
    # and so does the rest of its node.
    assert trim_fully(streams, "t", TopicRetention(1, 1, 0)) == 400
    assert raw_redis.xrange("t", count=1)[0][0] == ids[400]
    # Once it is acknowledged, up to what the slow group has not read goes too.
    raw_redis.xack("t", "slow", slow[400])
    assert trim_fully(streams, "t", TopicRetention(1, 1, 0)) == 200
    assert raw_redis.xrange("t", count=1)[0][0] == ids[600]
    assert b"topic_trimmed_unread" not in stats(raw_redis)


def test_a_hard_cap_trims_what_a_group_still_needs_and_counts_it(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    ids = fill(raw_redis, "t", 30_000)
    raw_redis.xgroup_create("t", "stuck", id="0")
    streams = TopicStreams.from_url(redis_url)
    # More than TRIM_BATCH to go: it takes several calls, each bounded.
    removed = trim_fully(streams, "t", TopicRetention(0, 10, 15_000))
    assert 15_000 - NODE < removed <= 15_000
    assert removed > TRIM_BATCH
    assert raw_redis.xrange("t", count=1)[0][0] == ids[removed]
    assert stats(raw_redis)[b"topic_trimmed_unread"] == str(removed).encode()


def test_a_hard_cap_first_takes_what_every_group_acknowledged(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    ids = fill(raw_redis, "t", 10 * NODE)
    raw_redis.xgroup_create("t", "g", id=ids[3 * NODE - 1])
    streams = TopicStreams.from_url(redis_url)
    assert trim_fully(streams, "t", TopicRetention(0, 0, 5 * NODE)) == 5 * NODE
    assert raw_redis.xrange("t", count=1)[0][0] == ids[5 * NODE]
    # Of the 500, the group had read the first 300 (as it was created), not the rest.
    assert stats(raw_redis)[b"topic_trimmed_unread"] == b"200"


def test_the_trimmer_trims_the_topics_deliveries_and_dead_letters_recorded(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() - 1_000
    rows = [
        Deliver(topic=f"t{n % 2}", id=new_message_id(due_ms), body=b"b", key="", headers="{}",
                deliver_at_ms=due_ms, attempt=1)
        for n in range(400)
    ]  # fmt: skip
    store.write_chunk(
        query_id="q", partition=0, batch_id=0, first_row=0, rows=rows, journal_ttl_s=60
    )
    assert raw_redis.smembers(keys.UNSHARDED.topics) == {b"t0", b"t1"}
    with Client(redis_url) as client:
        delivery = next(client.consume("t0", "g", block_ms=100, batch=1))
        delivery.dead_letter("bad")
    assert raw_redis.smembers(keys.UNSHARDED.topics) == {b"t0", b"t1", b"t0.DLQ"}
    minute = now_ms() // 60_000
    stale = minute - keys.FORECAST_TTL_S // 60 - 2
    raw_redis.zadd(keys.FORECAST_INDEX, {str(stale): stale, str(minute): minute})
    raw_redis.set("gone", "not a stream")
    raw_redis.sadd(keys.UNSHARDED.topics, "gone")
    policy = RetentionPolicy.parse("0", "5,t1=0", "0")
    trimmer = Trimmer(redis_url, policy, shards=1)
    # t0's group has read and dead-lettered one entry of 200: nothing else of t0 may
    # go (its node stays whole); t1 has no bound; the DLQ keeps its one entry;
    # "gone" is no stream: it is forgotten.
    assert trimmer.trim_all(TopicStreams.from_url(redis_url)) == 0
    assert (raw_redis.xlen("t0"), raw_redis.xlen("t1"), raw_redis.xlen("t0.DLQ")) == (200, 200, 1)
    assert raw_redis.smembers(keys.UNSHARDED.topics) == {b"t0", b"t1", b"t0.DLQ"}
    # The forecast's minutes whose counters expired leave its index.
    assert raw_redis.zscore(keys.FORECAST_INDEX, str(stale)) is None
    assert raw_redis.zscore(keys.FORECAST_INDEX, str(minute)) == minute
    while read := raw_redis.xreadgroup("g", "c", {"t0": ">"}, count=100):
        raw_redis.xack("t0", "g", *(entry for entry, _ in read[0][1]))
    removed = trimmer.trim_all(TopicStreams.from_url(redis_url))
    assert 5 <= raw_redis.xlen("t0") < 5 + NODE
    assert removed == 200 - raw_redis.xlen("t0")
    assert raw_redis.xlen("t1") == 200


def test_the_rejects_stream_keeps_about_its_bound_and_counts_what_went(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    fill(raw_redis, keys.REJECTS, keys.REJECTS_MAX_LEN + 500)
    raw_redis.set("poisoned", "not a stream")
    store = DeliveryStore.from_url(redis_url)
    due_ms = now_ms() - 1_000
    row = Deliver(topic="poisoned", id=new_message_id(due_ms), body=b"b", key="",
                  headers="{}", deliver_at_ms=due_ms, attempt=1)  # fmt: skip
    result = store.write_chunk(
        query_id="q", partition=0, batch_id=0, first_row=0, rows=[row], journal_ttl_s=60
    )
    assert result.rejected == 1
    trimmed = int(stats(raw_redis)[b"rejects_trimmed"])
    assert trimmed >= 400
    assert raw_redis.xlen(keys.REJECTS) == keys.REJECTS_MAX_LEN + 501 - trimmed
    # The newest reject, the one just made, is kept.
    assert raw_redis.xrevrange(keys.REJECTS, count=1)[0][1][b"id"] == row.id.encode()
