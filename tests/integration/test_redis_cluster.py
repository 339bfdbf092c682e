"""The sharded layout's scripts on a real Redis Cluster of three masters.

Redis Cluster refuses a script whose keys are in several slots (CROSSSLOT),
and one that touches a key another master serves. Each shard's scripts, and
each step of a sharded delivery, run here through ``redis+cluster://``:
the sink's chunks, the pump, cancels and the two steps to the topics, for
shards and topics spread over the three masters.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.cluster import ClusterNode, RedisCluster

from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.redis import keys, scripts
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.testing import redis_cluster, wait_for
from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.timing import now_ms
from tests.support.sinking import delivered

SHARDS = 3
SLOTS = 16384


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    """Three masters on loopback, each serving a third of the slots."""
    with LocalRedisCluster(tmp_path, primaries=3, replicas_per_primary=0) as started:
        yield started


@pytest.fixture
def cluster(nodes: LocalRedisCluster) -> Iterator[RedisCluster]:
    """redis-py's cluster client of ``nodes``, for what the test checks."""
    client = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in nodes.primaries()],
        password=nodes.password,
    )
    yield client
    client.close()


def ids_in(shard: int, count: int, due_ms: int) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        message_id = new_message_id(due_ms)
        if keys.keys_of(message_id, SHARDS) == keys.shard_keys(shard):
            found.append(message_id)
    return found


def test_each_shards_scripts_and_delivery_steps_run_on_a_cluster(
    nodes: LocalRedisCluster, cluster: RedisCluster
) -> None:
    masters = {cluster.keyslot(shard.namespace) * 3 // SLOTS for shard in keys.layout(SHARDS)}
    topics = ["orders", "billing", "audit"]
    assert len({cluster.keyslot(topic) * 3 // SLOTS for topic in topics}) > 1
    store = DeliveryStore.from_url(nodes.url)
    cluster.script_load(scripts.CANCEL.text)  # on every master
    cluster.script_load(scripts.SEND_NEAR.text)
    now = now_ms()
    expected: dict[str, int] = {}
    cancelled: list[str] = []
    for n, shard in enumerate(keys.layout(SHARDS)):
        due_now, soon = ids_in(n, 3, now - 10), ids_in(n, 3, now + 300)
        rows: list[Deliver] = [
            delivered(message_id, topic=topics[i % 3])
            for i, message_id in enumerate(due_now + soon)
        ]
        # A sink chunk: the due ones ready, the others into the shard's outbox.
        result = store.write_chunk(
            query_id="q", partition=0, batch_id=1, first_row=0, rows=rows,
            journal_ttl_s=3_600, shard=shard, horizon_ms=60_000,
        )  # fmt: skip
        assert result.written == 6
        # A cancel (the SDK's request) of one waiting in the outbox.
        args = scripts.cancel_args(now, 60_000, [(soon[0], deliver_at_ms_of(soon[0]), "")])
        call = scripts.CANCEL.command(scripts.CANCEL.keys(shard), args)
        assert cluster.execute_command(*call) == 1
        cancelled.append(soon[0])
        # The SDK's near path into the same shard's outbox.
        near = ids_in(n, 1, now + 300)[0]
        due = str(deliver_at_ms_of(near)).encode()
        record = {b"v": b"1", b"op": b"send", b"id": near.encode(), b"topic": b"orders",
                  b"body": b"x", b"deliver_at_ms": due}  # fmt: skip
        near_args = scripts.send_near_args([record], 60_000)
        call = scripts.SEND_NEAR.command(scripts.SEND_NEAR.keys(shard), near_args)
        assert cluster.execute_command(*call) == 1
        for message_id in [*due_now, *soon[1:], near]:
            expected[message_id] = deliver_at_ms_of(message_id)
    assert len(masters) > 1, "the shards are spread over the masters"

    def pump_and_flush() -> bool:
        for shard in keys.layout(SHARDS):
            store.pump(1_000, 3_600, shard=shard, horizon_ms=60_000)
            store.flush_ready(shard, 3_600)
        return sum(cluster.xlen(topic) for topic in topics) >= len(expected)

    wait_for(pump_and_flush, 10, "every shard's messages in their topics", interval_s=0.05)
    arrived: dict[str, int] = {}
    for topic in topics:
        for entry_id, fields in cluster.xrange(topic):
            message_id = fields[b"id"].decode()
            assert message_id not in arrived, "delivered twice"
            arrived[message_id] = int(entry_id.split(b"-")[0])
    assert set(arrived) == set(expected)
    assert all(arrived[i] >= expected[i] for i in expected), "delivered early"
    assert not set(arrived) & set(cancelled)
    stats: dict[str, int] = {}
    for shard in keys.layout(SHARDS):
        assert cluster.xlen(shard.ready) == 0
        for name, value in cluster.hgetall(shard.stats).items():
            stats[name.decode()] = stats.get(name.decode(), 0) + int(value)
    assert (stats["delivered"], stats["dropped"]) == (len(expected), SHARDS)


def test_cluster_ports_are_distinct_when_the_system_hands_one_out_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed = iter([60_000, 30_001, 30_001, 40_001, 30_002, 30_003])
    monkeypatch.setattr(redis_cluster, "free_port", lambda: next(handed))
    monkeypatch.setattr(redis_cluster, "port_is_free", lambda port: True)
    # 60,000, whose bus port would be above 65,535; 30,001 twice; and 40,001, whose
    # port is 30,001's bus port: all passed over.
    assert redis_cluster.cluster_ports(3) == [30_001, 30_002, 30_003]
