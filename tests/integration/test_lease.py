"""The scheduler's lease and the shards' fences against a real server: one scheduler
delivers at a time, and one whose lease was taken writes nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from delayline.errors import FencedError
from delayline.ids import new_message_id
from delayline.redis import keys
from delayline.redis.lease import Lease, holder_of
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.scheduler.lease_keeper import LeaseKeeper, wait_for_lease
from delayline.testing import wait_for
from delayline.timing import now_ms


@pytest.fixture
def lease(redis_url: str) -> Iterator[Lease]:
    connection = Lease.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def store(redis_url: str) -> Iterator[DeliveryStore]:
    connection = DeliveryStore.from_url(redis_url)
    yield connection
    connection.close()


def message(due_ms: int) -> Deliver:
    message_id = new_message_id(due_ms)
    return Deliver("orders", message_id, b"body", "k", "{}", due_ms, 1)


def write(store: DeliveryStore, batch_id: int, rows: list[Deliver]) -> int:
    result = store.write_chunk(
        query_id="q", partition=0, batch_id=batch_id, first_row=0, rows=rows, journal_ttl_s=60
    )
    return result.written


def test_the_first_taker_holds_the_lease_and_renews_it_with_its_token(lease: Lease) -> None:
    assert lease.take("a", 10_000) == 1
    assert lease.take("a", 10_000) == 1  # a renewal
    assert lease.take("b", 10_000) == 0  # held by another
    assert lease.holder() == (1, "a")


def test_a_lapsed_lease_goes_to_the_next_taker_with_a_higher_token(
    lease: Lease, raw_redis: redis.Redis
) -> None:
    assert lease.take("a", 100) == 1
    wait_for(lambda: lease.holder() is None, 5, "the lease to lapse")
    assert lease.take("b", 10_000) == 2
    # The old holder's renewal finds it taken: it has lost the lease.
    assert lease.take("a", 10_000, token=1) == 0
    assert holder_of(raw_redis.get(keys.LEASE)) == (2, "b")


def test_a_holder_takes_a_lapsed_lease_back_only_if_nobody_took_it_since(lease: Lease) -> None:
    assert lease.take("a", 100) == 1
    wait_for(lambda: lease.holder() is None, 5, "the lease to lapse")
    assert lease.take("a", 10_000, token=1) == 1  # Redis was away, say: nobody took it
    assert lease.give_up("a")
    assert lease.take("b", 10_000) == 2
    assert lease.give_up("b")
    assert lease.take("a", 10_000, token=1) == 0  # b took it meanwhile: a's token is stale


def test_giving_the_lease_up_frees_it_at_once_but_only_for_its_holder(lease: Lease) -> None:
    assert lease.take("a", 60_000) == 1
    assert not lease.give_up("b")
    assert lease.give_up("a")
    assert lease.take("b", 60_000) == 2


def test_a_stale_token_writes_nothing_and_the_current_one_does(
    store: DeliveryStore, lease: Lease, raw_redis: redis.Redis
) -> None:
    # No fence yet: token 0 (tools, tests) writes, as before any lease.
    assert write(store, 1, [message(now_ms() + 60_000)]) == 1
    old = lease.take("old", 60_000)
    lease.give_up("old")
    new = lease.take("new", 60_000)
    lease.raise_fences([keys.UNSHARDED], new)
    assert int(raw_redis.get(keys.UNSHARDED.fence) or 0) == new
    before = {key: raw_redis.dump(key) for key in raw_redis.keys("*")}
    due = message(now_ms() - 1_000)
    times = {b"deliver_at_ms": b"1", b"delivered_at_ms": b"2"}
    for token in (old, 0):
        store.fence_token = token
        with pytest.raises(FencedError, match="another scheduler took over"):
            write(store, 2, [due])
        with pytest.raises(FencedError):
            store.pump(100, 60)
        with pytest.raises(FencedError):
            store.settle_ready(keys.UNSHARDED, 60, [((b"1-1", times), "")])
    assert {key: raw_redis.dump(key) for key in raw_redis.keys("*")} == before, "it wrote"
    store.fence_token = new
    assert write(store, 2, [due]) == 1
    assert raw_redis.xlen("orders") == 1
    assert store.pump(100, 60).moved == 0


def test_raising_a_fence_never_lowers_it_and_a_lower_token_learns_it_lost(lease: Lease) -> None:
    shards = keys.read_layout(2)
    lease.raise_fences(shards, 5)
    with pytest.raises(FencedError, match="stands at 5"):
        lease.raise_fences(shards, 3)
    lease.raise_fences(shards, 7)


def test_the_keeper_renews_and_says_when_another_took_the_lease(
    lease: Lease, redis_url: str, raw_redis: redis.Redis
) -> None:
    token = lease.take("a", 500)
    lost = threading.Event()
    keeper = LeaseKeeper(redis_url, "a", token, 500, lost.set)
    keeper.start()
    try:
        # Renewed every 100 ms: it outlives its ttl many times over.
        wait_for(lambda: (raw_redis.pttl(keys.LEASE) or 0) > 0 and lease.holder(), 1, "a lease")
        raw_redis.delete(keys.LEASE)  # as if it lapsed during a pause
        assert lease.take("b", 60_000) == token + 1
        wait_for(lost.is_set, 5, "the keeper to see the lease taken")
        assert keeper.lost.is_set()
        assert lease.holder() == (token + 1, "b")
    finally:
        keeper.stop()


def test_a_standby_waits_until_the_lease_lapses_then_takes_it(lease: Lease) -> None:
    assert lease.take("active", 300) == 1
    said: list[str] = []
    token = wait_for_lease(lease, "standby", 1_500, threading.Event(), said.append)
    assert token == 2
    assert "held by active" in said[0]
    stop = threading.Event()
    stop.set()
    assert wait_for_lease(lease, "third", 1_500, stop, said.append) is None
