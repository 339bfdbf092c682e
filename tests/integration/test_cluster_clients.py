"""delayline's clients on a real Redis Cluster of three primaries with a replica each
(``redis+cluster://``): the SDK (sync and async), the pumps and the readers find
each key's primary, and a primary killed mid-way is replaced by its replica with
nothing lost that a client was told is sent."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from delayline import AsyncClient, Client
from delayline.errors import ConfigurationError
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.testing import wait_for
from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.testing.slots import spread_shards
from delayline.timing import now_ms
from tests.support.sinking import pump_all

SHARDS = 3
TOPICS = ("orders.timeout", "billing.remind", "mail.digest")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    with LocalRedisCluster(tmp_path, primaries=3, replicas_per_primary=1) as started:
        yield started


def topic_ids(cluster: LocalRedisCluster, topic: str) -> list[str]:
    _, port = cluster.primary_of(topic)
    entries = cluster.node_client(port).xrange(topic)
    return [fields[b"id"].decode() for _, fields in entries]


def test_sends_cancels_and_deliveries_find_each_keys_primary(cluster: LocalRedisCluster) -> None:
    due_ms = now_ms() + 1_000
    with closing(DeliveryStore.from_url(cluster.url)) as store, Client(cluster.url) as client:
        assert store.cluster
        store.publish_config(60_000, SHARDS)
        owners = {cluster.primary_of(shard.outbox) for shard in keys.layout(SHARDS)}
        assert len(owners) > 1, "the shards' keys spread over the primaries"
        sent = client.send_many(
            [{"topic": TOPICS[i % 3], "body": b"x", "deliver_at": due_ms} for i in range(30)]
        )
        far = client.send(TOPICS[0], b"far", delay=3_600_000)
        assert client.cancel(sent[0])
        wait_for(
            lambda: pump_all(store, SHARDS) == 0 and client.metrics().outbox == 0, 15, "the pumps"
        )
        arrived = [i for topic in TOPICS for i in topic_ids(cluster, topic)]
        assert sorted(arrived) == sorted(sent[1:])
        assert client.status(sent[0]).state == "cancelled"
        assert client.status(sent[1]).state == "delivered"
        metrics = client.metrics()
        assert (metrics.stats["delivered"], metrics.stats["dropped"]) == (29, 1)
        # The far one waits on its inbound stream, for Spark.
        inbound = keys.inbound_for(far, SHARDS)
        records = cluster.node_client(cluster.primary_of(inbound)[1]).xrange(inbound)
        sends = [f[b"id"].decode() for _, f in records if f[b"op"] == b"send"]
        assert sends == [far]


def test_a_consumer_and_the_async_client_read_and_write_across_primaries(
    cluster: LocalRedisCluster,
) -> None:
    async def send_async() -> list[str]:
        async with AsyncClient(cluster.url) as client:
            return await client.send_many(
                [{"topic": topic, "body": b"a", "delay": 0} for topic in TOPICS]
            )

    with closing(DeliveryStore.from_url(cluster.url)) as store, Client(cluster.url) as client:
        store.publish_config(60_000, SHARDS)
        sent = asyncio.run(send_async())
        wait_for(
            lambda: pump_all(store, SHARDS) == 0 and client.metrics().outbox == 0, 15, "the pumps"
        )
        got = []
        for topic in TOPICS:
            for delivery in client.consume(topic, "g", block_ms=2_000):
                got.append(delivery.id)
                delivery.ack()
                break
        assert sorted(got) == sorted(sent)


def test_a_killed_primary_is_replaced_and_loses_nothing_sent(cluster: LocalRedisCluster) -> None:
    with (
        closing(DeliveryStore.from_url(cluster.url, patience_ms=30_000)) as store,
        Client(cluster.url, patience_ms=30_000) as client,
    ):
        store.publish_config(60_000, SHARDS)
        due_ms = now_ms() + 2_000
        before = client.send_many(
            [{"topic": TOPICS[i % 3], "body": b"x", "deliver_at": due_ms} for i in range(60)]
        )
        victim = cluster.primary_of(keys.layout(SHARDS)[0].outbox)[1]
        cluster.kill(victim)
        # Sends go on at once: those to the dead primary's slots wait for its replica.
        after = client.send_many(
            [{"topic": TOPICS[i % 3], "body": b"y", "deliver_at": due_ms} for i in range(30)]
        )
        cluster.wait_for_failover(victim)
        wait_for(
            lambda: pump_all(store, SHARDS) == 0 and client.metrics().outbox == 0,
            30,
            "the pumps, after the failover",
        )
        arrived = [i for topic in TOPICS for i in topic_ids(cluster, topic)]
        assert sorted(arrived) == sorted(before + after), "each once, none lost"


def test_spread_shards_puts_each_shard_on_its_own_primary(cluster: LocalRedisCluster) -> None:
    placed = spread_shards(cluster, SHARDS)
    assert len(set(placed.values())) == SHARDS
    for shard, address in placed.items():
        assert cluster.primary_of(keys.layout(SHARDS)[shard].outbox) == address
    with Client(cluster.url) as client, closing(DeliveryStore.from_url(cluster.url)) as store:
        store.publish_config(60_000, SHARDS)
        sent = client.send_many([{"topic": "t", "body": b"x", "delay": 0}] * 30)
        wait_for(
            lambda: pump_all(store, SHARDS) == 0 and client.metrics().outbox == 0, 15, "the pumps"
        )
        assert sorted(topic_ids(cluster, "t")) == sorted(sent)


def test_before_a_scheduler_publishes_its_shards_sends_take_the_default_stream(
    cluster: LocalRedisCluster,
) -> None:
    with Client(cluster.url) as client:
        # Due at once, so the near path on one server; here it would need the unsharded
        # keys in one script, which a cluster refuses: every send takes the default stream.
        message_id = client.send("t", b"x", delay=0)
        stream = cluster.node_client(cluster.primary_of(keys.INBOUND)[1]).xrange(keys.INBOUND)
        assert [fields[b"id"].decode() for _, fields in stream] == [message_id]
        with pytest.raises(ConfigurationError, match="start delayline run"):
            client.cancel(message_id)
        assert client.pending(by="minute").total == 0


def test_delayline_run_refuses_one_shard_on_a_cluster(
    cluster: LocalRedisCluster, tmp_path: Path
) -> None:
    run = [sys.executable, "-m", "delayline", "run", "--redis-url", cluster.url, "--no-api",
           "--data-dir", str(tmp_path / "data"), "--inbound-shards", "1"]  # fmt: skip
    finished = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert finished.returncode != 0
    assert "--inbound-shards 2 or more" in finished.stderr
    assert cluster.password not in finished.stdout + finished.stderr
    assert "Traceback" not in finished.stderr
