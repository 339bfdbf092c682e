"""Redis shards (``--inbound-shards N``): every message's outbox entry, status records
and cancel requests live in its shard's keys, which the SDK, the pumps and the
readers all find by the message's id; a change of the count leaves nothing where
the new one cannot find it (redis/layout.py)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import redis

from delayline import Client
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.redis import keys, scripts
from delayline.redis.inbound import InboundStream
from delayline.redis.layout import ShardLayout
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.scheduler.pump import Pump
from delayline.scheduler.runtime.runner import Scheduler
from delayline.scheduler.settings import SchedulerSettings
from delayline.testing import wait_for
from delayline.timing import now_ms
from tests.support.sinking import delivered, pump_all

SHARDS = 2


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
            lambda: delivered.append(pump_all(store, SHARDS)) or sum(delivered) >= 20,
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


def id_moved_by(change: tuple[int, int], due_ms: int) -> str:
    """A new id, due at ``due_ms``, whose shard differs between the two counts."""
    old, new = change
    while True:
        message_id = new_message_id(due_ms)
        if keys.keys_of(message_id, old) != keys.keys_of(message_id, new):
            return message_id


def sink_rows(store: DeliveryStore, rows: list[Deliver], shards: int, batch_id: int) -> None:
    """Write ``rows`` as a sink partition of ``shards`` does: each in its shard."""
    for shard, mine in keys.by_shard(rows, shards, lambda row: row.id).items():
        store.write_chunk(
            query_id="q", partition=0, batch_id=batch_id, first_row=0, rows=mine,
            journal_ttl_s=3_600, shard=shard,
        )  # fmt: skip


def test_a_changed_shard_count_finds_every_cancel_and_status_of_the_old_one(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    old, new = SHARDS, 3
    due_ms = now_ms() + 300
    # Pending in the state at the change (the drain hands them over): one cancelled,
    # one rescheduled to a copy in another shard under the new count; and one
    # delivered under the old count.
    cancelled, rescheduled = (id_moved_by((old, new), due_ms) for _ in range(2))
    settled = id_moved_by((old, new), now_ms() - 5)
    while True:
        copy = new_message_id(due_ms + 200)
        if keys.keys_of(copy, new) != keys.keys_of(rescheduled, new):
            break
    with (
        closing(ShardLayout.from_url(redis_url)) as layout,
        closing(DeliveryStore.from_url(redis_url)) as store,
        closing(InboundStream.from_url(redis_url)) as inbound,
        Client(redis_url) as client,
    ):
        assert layout.claim(old) == (1, old)
        requests = [(cancelled, due_ms, ""), (rescheduled, due_ms, copy)]
        inbound.record_cancel_requests(requests, retention_ms=60_000, shards=old)
        sink_rows(store, [delivered(settled)], old, batch_id=1)

        assert layout.claim(new) == (1, old, new)
        store.publish_config(60_000, new)
        assert raw_redis.hget(keys.CONFIG, keys.SHARD_HISTORY) == b"1,2,3"
        for message_id in (cancelled, rescheduled):
            moved_to = keys.keys_of(message_id, new).cancel_requests(due_ms)
            assert raw_redis.hexists(moved_to, message_id)
            assert raw_redis.pttl(moved_to) > 0
        # The status of every one, found under the count it was written with.
        assert client.status(cancelled).state == "cancelled"
        assert client.status(rescheduled).rescheduled_to == copy
        assert client.status(settled).state == "delivered"

        # The new scheduler delivers the handed-over ones in their new shards.
        wait_for(lambda: now_ms() > due_ms, 5, "the messages to be due", interval_s=0.01)
        sink_rows(store, [delivered(cancelled), delivered(rescheduled)], new, batch_id=2)
        for shard in keys.layout(new):
            store.flush_ready(shard, 3_600)
        assert [entry[b"id"] for _, entry in raw_redis.xrange("t")] == [settled.encode()]
        # The copy is of another shard now: it goes through the inbound stream, which
        # routes it, and not into the dropping shard's outbox.
        home = keys.keys_of(rescheduled, new)
        [(_, record)] = raw_redis.xrange(home.inbound)
        assert (record[b"op"], record[b"id"]) == (b"send", copy.encode())
        assert raw_redis.zcard(home.outbox) == 0
        metrics = client.metrics()  # every shard of every count, added up
        assert (metrics.stats["delivered"], metrics.stats["dropped"]) == (1, 2)


def test_a_smaller_shard_count_moves_what_waits_in_a_stream_it_no_longer_reads(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with closing(ShardLayout.from_url(redis_url)) as layout:
        layout.claim(3)
        raw_redis.xadd(keys.INBOUND, {"n": "0"})
        for n in (1, 2):  # sent, not yet read
            raw_redis.xadd(keys.inbound_shard(2), {"n": str(n)})
        assert layout.claim(2) == (1, 3, 2)
        assert [f[b"n"] for _, f in raw_redis.xrange(keys.INBOUND)] == [b"0", b"1", b"2"]
        assert raw_redis.xlen(keys.inbound_shard(2)) == 0
        # A producer that goes by the old count a while longer: the next start moves it.
        raw_redis.xadd(keys.inbound_shard(2), {"n": "3"})
        assert layout.claim(2) == (1, 3, 2)
        assert raw_redis.xlen(keys.INBOUND) == 4


def test_a_scheduler_pumps_the_outbox_of_every_shard_count_used(
    redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    with Client(redis_url) as client:
        left = client.send("t", b"x", delay=300)  # no scheduler has published: unsharded
    assert raw_redis.zcard(keys.OUTBOX) == 1
    settings = SchedulerSettings(redis_url=redis_url, inbound_shards=SHARDS, data_dir=tmp_path)
    scheduler = Scheduler(settings)
    try:
        scheduler.start_pumps()
        wait_for(lambda: raw_redis.xlen("t") == 1, 10, "the unsharded outbox to be pumped")
    finally:
        scheduler.stop()
    [(_, entry)] = raw_redis.xrange("t")
    assert entry[b"id"] == left.encode()
    assert int(entry[b"delivered_at_ms"]) >= deliver_at_ms_of(left)
    assert raw_redis.hget(keys.CONFIG, keys.SHARD_HISTORY) == b"1,2"


def test_the_pumps_start_once_however_soon_the_first_one_prepares(
    redis_url: str, raw_redis: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first pump's preparation adds a pump for the unsharded outbox of the older
    count while the others start: here it is given every chance to finish first."""
    with Client(redis_url) as client:
        client.send("t", b"x", delay=300)  # unsharded: a pump for its outbox is added
    settings = SchedulerSettings(redis_url=redis_url, inbound_shards=SHARDS, data_dir=tmp_path)
    scheduler = Scheduler(settings)
    started = Pump.start

    def start_then_let_it_prepare(pump: Pump) -> None:
        started(pump)
        scheduler._prepared.wait(2)

    monkeypatch.setattr(Pump, "start", start_then_let_it_prepare)
    try:
        scheduler.start_pumps()  # raised "threads can only be started once"
        wait_for(lambda: raw_redis.xlen("t") == 1, 10, "the unsharded outbox to be pumped")
    finally:
        scheduler.stop()


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
        written = keys.topic_written("orders")
        script_keys = scripts.DELIVER_READY.keys(topic="orders", written=written)
        assert (
            raw_redis.eval(scripts.DELIVER_READY.text, len(script_keys), *script_keys, *args) == []
        )
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
