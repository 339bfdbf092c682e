"""delayline's clients on one primary with a replica: listed both in a URL
(``redis://:pw@a,b``) and promoted by hand, or found through Sentinels
(``redis+sentinel://``) that promote the replica themselves. Writes wait for the
replica's confirmation, so what a client was told is sent survives the promotion."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from delayline import AsyncClient, Client
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.testing import wait_for
from delayline.testing.replicated import ReplicatedRedis
from delayline.timing import now_ms

TOPIC = "orders.timeout"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis(tmp_path) as started:
        yield started


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with ReplicatedRedis(tmp_path, sentinels=True) as started:
        yield started


def send_pump_fail_over(
    servers: ReplicatedRedis, url: str, fail_over: Callable[[], object]
) -> None:
    """Send, fail over with ``fail_over``, send again, pump: each message once."""
    with (
        closing(DeliveryStore.from_url(url, patience_ms=30_000)) as store,
        Client(url, patience_ms=30_000) as client,
    ):
        due_ms = now_ms() + 1_000
        before = client.send_many([{"topic": TOPIC, "body": b"a", "deliver_at": due_ms}] * 50)
        fail_over()
        after = client.send_many([{"topic": TOPIC, "body": b"b", "deliver_at": due_ms}] * 50)
        wait_for(
            lambda: store.pump(1_000, 3_600).moved == 0 and client.metrics().outbox == 0,
            30,
            "the pump, after the failover",
        )
        _, port = servers.primary()
        ids = [f[b"id"].decode() for _, f in servers.node_client(port).xrange(TOPIC)]
        assert sorted(ids) == sorted(before + after), "each once, none lost"
        assert client.metrics().stats["delivered"] == 100


def test_a_replica_promoted_by_hand_takes_over(pair: ReplicatedRedis) -> None:
    assert pair.url.count(",") == 1, "the URL lists both servers"

    def promote() -> None:
        pair.kill_primary()
        pair.promote_replica()

    send_pump_fail_over(pair, pair.url, promote)


def test_sentinels_promote_the_replica_and_the_clients_follow(watched: ReplicatedRedis) -> None:
    send_pump_fail_over(watched, watched.sentinel_url, watched.kill_primary)


def test_a_write_waits_for_the_replica(pair: ReplicatedRedis) -> None:
    _, port = pair.primary()
    replica = next(p for p in pair.ports if p != port)
    with Client(pair.url) as client:
        message_id = client.send(TOPIC, b"x", delay=60_000_000)
        # Confirmed by the replica before send returned: no polling needed.
        assert pair.node_client(replica).xlen(keys.INBOUND) == 1, message_id


def test_every_kind_of_write_waits_on_its_own_connection(pair: ReplicatedRedis) -> None:
    """With the replica stopped, each write blocks for the replica wait (WAIT counts
    what its connection wrote: on another connection it would return at once)."""
    _, port = pair.primary()
    replica_port = next(p for p in pair.ports if p != port)
    replica_pid = int(pair.node_client(replica_port).info("server")["process_id"])
    url = pair.url + "?replica_wait_ms=400"

    async def send_async() -> float:
        async with AsyncClient(url) as client:
            began = time.monotonic()
            await client.send_many([{"topic": TOPIC, "body": b"n", "delay": 1_000}] * 2)
            return time.monotonic() - began

    with Client(url) as client, closing(DeliveryStore.from_url(url)) as store:
        client.send(TOPIC, b"warm", delay=60_000_000)  # connections made, ROLE read
        client.send(TOPIC, b"due", delay=300)  # for the pump to deliver, below
        os.kill(replica_pid, signal.SIGSTOP)
        try:
            took = {}
            began = time.monotonic()
            client.send(TOPIC, b"far", delay=60_000_000)  # one XADD
            took["xadd"] = time.monotonic() - began
            began = time.monotonic()
            client.send_many([{"topic": TOPIC, "body": b"n", "delay": 1_000}] * 2)  # MULTI
            took["transaction"] = time.monotonic() - began
            began = time.monotonic()
            assert store.pump(1_000, 3_600).moved >= 1  # one script call
            took["script"] = time.monotonic() - began
            took["async transaction"] = asyncio.run(send_async())
        finally:
            os.kill(replica_pid, signal.SIGCONT)
    assert all(seconds >= 0.35 for seconds in took.values()), took
