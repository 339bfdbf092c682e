"""``delayline run`` on a real Redis Cluster of three primaries with a replica each
(``--redis-url redis+cluster://...``), with the order-timeout workload: raw records
(sends due over 0-15 s, a burst at one instant, cancels, malformed records), and SDK
sends near and far. In the middle, a primary is SIGKILLed and its replica promoted:
nothing is lost, doubled or early, and no cancelled message is delivered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import cast

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from delayline import Client
from delayline.model import Message
from delayline.redis import keys
from delayline.testing import SMALL_WHEEL
from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.harness import (
    SchedulerProcess,
    check_exactly_once,
    send_workload,
    settled,
    stats_of,
    wait_for,
)

pytestmark = pytest.mark.spark

SHARDS = 3


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    with LocalRedisCluster(tmp_path / "redis", primaries=3, replicas_per_primary=1) as started:
        yield started


def cluster_client(nodes: LocalRedisCluster) -> redis.Redis:
    """redis-py's cluster client, for the test's raw writes and checks; typed as the
    harness takes a client (it calls single-key commands only)."""
    startup = [ClusterNode(host, port) for host, port in nodes.primaries()]
    return cast(redis.Redis, RedisCluster(startup_nodes=startup, password=nodes.password))


def write_offsets(nodes: LocalRedisCluster) -> dict[int, int]:
    """Each primary's replication offset now, by port: how far its replicas must
    acknowledge to have every write made so far."""
    return {
        port: int(nodes.node_client(port).info("replication")["master_repl_offset"])
        for _, port in nodes.primaries()
    }


def replicated(nodes: LocalRedisCluster, offsets: dict[int, int]) -> bool:
    """Whether every replica has acknowledged its primary's writes up to ``offsets``
    (the raw records were written without WAIT, as a raw producer may).

    Not up to the primary's offset at the time of asking: the scheduler writes all
    the while, so that offset is ahead of the replicas' last acknowledgement (sent
    once a second) until every message has settled.
    """
    for port, offset in offsets.items():
        info = nodes.node_client(port).info("replication")
        acked = [int(v["offset"]) for k, v in info.items() if k.startswith("slave")]
        if not acked or min(acked) < offset:
            return False
    return True


def sdk_messages(topic: str, count: int, *, near_ms: int, far_ms: int) -> list[Message]:
    """``count`` messages to ``topic``, every other one due in ``near_ms``, the rest in
    ``far_ms``."""
    sent_ms = now_ms()
    return [
        Message.create(
            topic, f"sdk-{n}".encode(), now_ms=sent_ms, limits=Limits(),
            delay=near_ms if n % 2 else far_ms, key=f"s{n}",
        )
        for n in range(count)
    ]  # fmt: skip


def test_the_workload_survives_a_killed_primary(nodes: LocalRedisCluster, data_dir: Path) -> None:
    args = ["--redis-url", nodes.url, "--no-api", "--data-dir", str(data_dir),
            "--partitions", "2", *SMALL_WHEEL]  # fmt: skip
    with (
        SchedulerProcess(args) as process,
        closing(cluster_client(nodes)) as raw,
        Client(nodes.url, patience_ms=60_000) as client,
    ):
        assert f"a cluster: {SHARDS} shards on " in process.output
        workload = send_workload(
            nodes.url, total=1_200, max_delay_ms=15_000, burst=300, malformed=11,
            inbound_shards=SHARDS, raw=raw,
        )  # fmt: skip
        # SDK sends: near ones (the outbox, within the 1 s horizon) and far ones.
        sdk = sdk_messages("orders.timeout", 200, near_ms=300, far_ms=8_000)
        assert client.send_many(sdk) == [message.id for message in sdk]
        workload.messages.update((message.id, message) for message in sdk)
        offsets = write_offsets(nodes)
        wait_for(lambda: replicated(nodes, offsets), 30, "the replicas to have the raw records")
        wait_for(lambda: stats_of(raw).get("delivered", 0) >= 300, 90, "deliveries", [process])
        assert not settled(raw, workload), f"the kill comes after all settled: {stats_of(raw)}"
        victim = nodes.primary_of(keys.layout(SHARDS)[0].outbox)[1]
        nodes.kill(victim)
        nodes.wait_for_failover(victim)
        more = sdk_messages("reminders", 50, near_ms=500, far_ms=5_000)
        assert client.send_many(more) == [message.id for message in more]
        workload.messages.update((message.id, message) for message in more)
        wait_for(lambda: settled(raw, workload), 180, "every message to settle", [process])
        check_exactly_once(raw, workload, max_late_ms=None)
        assert process.process is not None
        assert process.process.poll() is None, "the scheduler rode out the failover"
