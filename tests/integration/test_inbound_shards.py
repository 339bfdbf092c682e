"""Sharded inbound (``--inbound-shards N``): producers spread their sends over N
streams, and the source reads each as a partition with an offset of its own."""

from __future__ import annotations

import redis
from pyspark.sql.streaming.datasource import ReadMaxRows

from delayline import Client
from delayline.ids import shard_of
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.scheduler.pipeline.feeds import START_ID
from delayline.scheduler.pipeline.source import InboundRange, InboundReader
from delayline.scheduler.settings import SchedulerSettings
from delayline.testing import wait_for
from delayline.timing import now_ms


def test_each_shard_is_a_partition_with_its_own_offset(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    settings = SchedulerSettings(redis_url=redis_url, inbound_shards=3, source_partitions=2)
    reader = InboundReader(settings, run_token="run")
    start = reader.initialOffset()
    assert start == {"id": START_ID, "id.0": START_ID, "id.1": START_ID, "id.2": START_ID}
    shard = keys.inbound_shard(1)
    in_shard = [raw_redis.xadd(shard, {"n": n}).decode() for n in range(4)]
    in_default = raw_redis.xadd(keys.INBOUND, {"n": "d"}).decode()

    # Admission control shares a batch's 8 rows among the 4 streams: 2 each.
    end = reader.latestOffset(start, ReadMaxRows(8))
    assert (end["id"], end["id.1"]) == (in_default, in_shard[1])
    assert end["id.0"] == end["id.2"] == START_ID
    ranges = reader.partitions(start, end)
    assert [r for r in ranges if r.stream == shard] == [InboundRange(START_ID, in_shard[1], shard)]
    assert {r.stream for r in ranges} == {keys.INBOUND, shard}  # nothing for the empty ones

    reader.commit(end)  # trims each stream up to its own offset
    assert (raw_redis.xlen(shard), raw_redis.xlen(keys.INBOUND)) == (2, 0)
    following = reader.latestOffset(end, ReadMaxRows(8))
    assert following["id.1"] == in_shard[3]
    assert reader.partitions(end, following) == [InboundRange(in_shard[1], in_shard[3], shard)]


def test_an_offset_from_before_the_shards_reads_them_from_the_start(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    old = raw_redis.xadd(keys.INBOUND, {"n": "old"}).decode()
    new = raw_redis.xadd(keys.inbound_shard(0), {"n": "new"}).decode()
    reader = InboundReader(SchedulerSettings(redis_url=redis_url, inbound_shards=2), "run")
    end = reader.latestOffset({"id": old, "run": "run", "tick": "0"}, ReadMaxRows(100))
    assert (end["id"], end["id.0"], end["id.1"]) == (old, new, START_ID)


def test_the_sdk_spreads_sends_over_the_shards_the_scheduler_published(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    far = {"topic": "t", "body": b"x", "deliver_at": now_ms() + 3_600_000}
    with Client(redis_url) as client:
        # No scheduler has said: everything goes to the default stream, always read.
        before = client.send_many([far] * 5)
        assert raw_redis.xlen(keys.INBOUND) == 5
        raw_redis.hset(keys.CONFIG, "inbound_shards", 4)
        sent = client.send_many([far] * 40)
    # A new client reads the count afresh (a client reads it again every 10 s).
    raw_redis.hset(keys.CONFIG, "inbound_shards", 1)
    with Client(redis_url) as client:
        later = client.send_many([far] * 3)
    assert raw_redis.xlen(keys.INBOUND) == 5 + 3
    placed = {
        fields[b"id"].decode(): shard
        for shard in range(4)
        for _, fields in raw_redis.xrange(keys.inbound_shard(shard))
    }
    assert placed == {message_id: shard_of(message_id, 4) for message_id in sent}
    assert len(set(placed.values())) == 4  # 40 ids cover all four
    assert not set(placed) & set(before + later)


def test_a_busy_source_forgets_the_wakeups_its_batches_fired(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    # Under a load that never let the query idle, the wakeups were forgotten only by
    # an idle check, and delayline:wakeups grew by 3 MB an hour.
    reader = InboundReader(SchedulerSettings(redis_url=redis_url, idle_batch_ms=600_000), "run")
    inbound = InboundStream.from_url(redis_url)
    ticked_ms = now_ms() - 1_000
    later_ms = now_ms() + 3_600_000
    inbound.add_wakeups([ticked_ms - 500, ticked_ms, later_ms])
    raw_redis.xadd(keys.INBOUND, {"n": "busy"})
    start = {"id": START_ID, "run": "run", "tick": str(ticked_ms)}
    end = reader.latestOffset(start, ReadMaxRows(100))
    assert end["id"] != START_ID  # a batch with data
    assert raw_redis.zrange(keys.WAKEUPS, 0, -1, withscores=True) == [
        (str(later_ms).encode(), later_ms)
    ]
    # A timer still wakes an idle source: no new entries, one wakeup due.
    assert reader.latestOffset(end, ReadMaxRows(100)) == end
    inbound.add_wakeups([int(end["tick"]) + 1])
    woken = wait_for(
        lambda: reader.latestOffset(end, ReadMaxRows(100)) != end, 5, "a timer's wakeup"
    )
    assert woken
