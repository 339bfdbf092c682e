"""Redis shards (``--inbound-shards N``): every message's outbox entry, status records
and cancel requests live in its shard's keys, which the SDK, the pumps and the
readers all find by the message's id; a changed shard count is refused while a
message is pending in the old layout."""

from __future__ import annotations

from contextlib import closing

import pytest
import redis

from delayline import Client
from delayline.errors import ConfigurationError
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.timing import now_ms
from tests.support import wait_for

SHARDS = 2


def pump_all(store: DeliveryStore) -> int:
    return sum(store.pump(1_000, 3_600, shard=shard).moved for shard in keys.layout(SHARDS))


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


def test_a_first_sharded_run_refuses_what_unsharded_producers_left_pending(
    redis_url: str,
) -> None:
    with closing(DeliveryStore.from_url(redis_url)) as store, Client(redis_url) as client:
        client.send("t", b"x", delay=1_000)  # no scheduler has published: unsharded
        with pytest.raises(ConfigurationError, match="laid out for 1 shard"):
            store.claim_layout(SHARDS)
        store.claim_layout(1)
