"""Redis shards (``--inbound-shards N``): every message's outbox entry, status records
and cancel requests live in its shard's keys, which the SDK, the pumps and the
readers all find by the message's id; a changed shard count is refused while a
message is pending in the old layout."""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pytest
import redis

from delayline import Client
from delayline.errors import ConfigurationError
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.redis import keys, scripts
from delayline.redis.store import DeliveryStore
from delayline.timing import now_ms
from tests.sinking import delivered
from tests.support import wait_for

SHARDS = 2


def pump_all(store: DeliveryStore) -> int:
    """Pump every shard's outbox, and write what that readied to the topics."""
    moved = 0
    for shard in keys.layout(SHARDS):
        moved += store.pump(1_000, 3_600, shard=shard).moved
        store.flush_ready(shard, 3_600)
    return moved


def test_each_message_stays_in_its_shard_from_send_to_delivery(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.hset(keys.CONFIG, mapping={"inbound_shards": SHARDS, "horizon_ms": 60_000})
    due_ms = now_ms() + 1_500
    with Client(redis_url) as client, closing(DeliveryStore.from_url(redis_url)) as store:
        sent = client.send_many([{"topic": "t", "body": b"x", "deliver_at": due_ms}] * 20)
        for shard in keys.layout(SHARDS):
            mine = {i for i in sent if keys.keys_of(i, SHARDS) == shard}
            assert {i.decode() for i in raw_redis.zrange(shard.outbox, 0, -1)} == mine
            assert mine, "twenty ids over two shards: each holds some"
        assert not raw_redis.exists(keys.OUTBOX, keys.STATS)  # nothing unsharded

        cancelled, moved = sent[0], sent[1]
        assert client.cancel(cancelled)
        due_cancelled = keys.keys_of(cancelled, SHARDS).cancel_requests(due_ms)
        assert raw_redis.hexists(due_cancelled, cancelled)
        new_id = client.reschedule(moved, delay=1_000)
        assert keys.keys_of(new_id, SHARDS) == keys.keys_of(moved, SHARDS)
        # The cancelled one waits for the pump to drop it; the moved one left for its copy.
        assert client.metrics().outbox == 20

        delivered: list[int] = []
        wait_for(
            lambda: delivered.append(pump_all(store)) or sum(delivered) >= 20,
            10,
            "the pumps to deliver every shard's messages",
            interval_s=0.01,
        )
        assert raw_redis.xlen("t") == 19
        assert client.status(cancelled).state == "cancelled"
        assert client.status(moved).state == "rescheduled"
        assert client.status(sent[2]).state == "delivered"
        metrics = client.metrics()
        assert (metrics.stats["delivered"], metrics.stats["dropped"]) == (19, 2)
        assert (metrics.pending, metrics.outbox) == (0, 0)
        assert client.pending(by="minute").total == 0


def test_a_changed_shard_count_is_refused_while_a_message_is_pending(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store, Client(redis_url) as client:
        store.claim_layout(SHARDS)
        store.publish_config(60_000, SHARDS)
        client.send("t", b"x", delay=1_000)
        with pytest.raises(ConfigurationError, match="--inbound-shards 2"):
            store.claim_layout(3)
        store.claim_layout(SHARDS)  # the same count is always taken
        wait_for(lambda: pump_all(store) == 1, 10, "the pump to deliver", interval_s=0.01)
        store.claim_layout(3)  # nothing pending: the count may change
        assert raw_redis.hget(keys.CONFIG, "layout_shards") == b"3"


def test_a_smaller_shard_count_is_refused_while_a_record_waits_in_a_stream_it_drops(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store:
        store.claim_layout(3)
        raw_redis.xadd(keys.inbound_shard(2), {"v": "1"})  # sent, not yet read
        with pytest.raises(ConfigurationError, match="1 message"):
            store.claim_layout(2)
        raw_redis.delete(keys.inbound_shard(2))
        store.claim_layout(2)


def test_a_first_sharded_run_refuses_what_unsharded_producers_left_pending(
    redis_url: str,
) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store, Client(redis_url) as client:
        client.send("t", b"x", delay=1_000)  # no scheduler has published: unsharded
        with pytest.raises(ConfigurationError, match="laid out for 1 shard"):
            store.claim_layout(SHARDS)
        store.claim_layout(1)


def sink_one_due(store: DeliveryStore, topic: str) -> tuple[keys.ShardKeys, str]:
    """A sink chunk of one message due now, in its shard of SHARDS; the shard and its id."""
    message_id = new_message_id(now_ms() - 10)
    shard = keys.keys_of(message_id, SHARDS)
    store.write_chunk(
        query_id="q",
        partition=0,
        batch_id=1,
        first_row=0,
        rows=[delivered(message_id, topic=topic)],
        journal_ttl_s=3_600,
        shard=shard,
    )
    return shard, message_id


def test_a_sharded_delivery_reaches_its_topic_once_whatever_is_repeated(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store:
        shard, message_id = sink_one_due(store, "orders")
        # Journalled and ready in its shard; not yet in the topic, nor counted.
        assert raw_redis.hexists(shard.journal(deliver_at_ms_of(message_id)), message_id)
        [(_, ready)] = raw_redis.xrange(shard.ready)
        assert (ready[b"topic"], ready[b"id"]) == (b"orders", message_id.encode())
        assert not raw_redis.exists("orders")
        assert not raw_redis.hget(shard.stats, "delivered")
        # A flusher that wrote the topic and died before it settled: the next one
        # writes nothing again and counts it once.
        entries = raw_redis.xrange(shard.ready)
        args: list[Any] = [3_600]
        for entry_id, fields in entries:
            args += [entry_id, len(fields), *(p for pair in fields.items() for p in pair)]
        deliver = raw_redis.register_script(scripts.DELIVER_READY)
        assert deliver(keys=["orders", keys.topic_written("orders")], args=args) == []
        assert store.flush_ready(shard, 3_600) == 1
        assert store.flush_ready(shard, 3_600) == 0
        [(_, entry)] = raw_redis.xrange("orders")
        assert b"topic" not in entry
        assert entry[b"id"] == message_id.encode()
        assert int(entry[b"delivered_at_ms"]) >= deliver_at_ms_of(message_id)
        assert raw_redis.hget(shard.stats, "delivered") == b"1"
        assert raw_redis.xlen(shard.ready) == 0


def test_a_topic_that_cannot_take_a_sharded_delivery_keeps_it_as_a_reject(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.set("poisoned", "not a stream")
    with closing(DeliveryStore.from_url(redis_url)) as store:
        shard, message_id = sink_one_due(store, "poisoned")
        assert store.flush_ready(shard, 3_600) == 1
        [(_, reject)] = raw_redis.xrange(shard.rejects)
        assert reject[b"id"] == message_id.encode()
        assert reject[b"reason"].startswith(b"cannot deliver to topic poisoned: WRONGTYPE")
        due_ms = deliver_at_ms_of(message_id)
        assert not raw_redis.hexists(shard.journal(due_ms), message_id)  # not delivered
        assert raw_redis.hget(shard.stats, "rejected") == b"1"
        assert raw_redis.hget(shard.stats, "delivered") is None
        assert raw_redis.get("poisoned") == b"not a stream"
