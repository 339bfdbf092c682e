"""Groups against a real server: each group's messages go through its own lane (outbox,
counters, pump) to its own topics; a herd in one lane does not hold another's back;
each quota refuses a send at its bound, whole, with QuotaError; a group nobody
created gets nothing stuck."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import redis

from delayline import Client, GroupExistsError, GroupNotFoundError, QuotaError, Quotas
from delayline.errors import ValidationError
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.scheduler.pipeline.chunks import write_once
from delayline.scheduler.pipeline.task import BatchTask
from delayline.scheduler.pump import Pump
from delayline.testing import wait_for
from delayline.timing import now_ms


@pytest.fixture
def lanes(redis_url: str) -> Iterator[dict[str, Pump]]:
    """Groups ``a`` and ``b``, with a pump for each one's lane (as the scheduler starts
    them for every group it finds) and one for the default lane."""
    with Client(redis_url) as admin:
        admin.create_group("a")
        admin.create_group("b")
    pumps = {
        group: Pump(redis_url, journal_ttl_s=3600, shard=keys.UNSHARDED.lane(group))
        for group in ("default", "a", "b")
    }
    for pump in pumps.values():
        pump.start()
    yield pumps
    for pump in pumps.values():
        pump.stop()
        assert not pump.alive


def lateness_ms(raw: redis.Redis, stream: str) -> np.ndarray:
    """Each entry's lateness: its stream id's ms (Redis's clock as the pump wrote it)
    less its due time."""
    return np.array(
        [
            int(entry_id.split(b"-")[0]) - int(f[b"deliver_at_ms"])
            for entry_id, f in raw.xrange(stream)
        ]
    )


def test_a_group_sends_to_its_own_topics_through_its_own_lane(
    redis_url: str, raw_redis: redis.Redis, lanes: dict[str, Pump]
) -> None:
    with Client(redis_url, group="a") as client:
        sent = client.send("invoices", b"hi", delay=200)
        wait_for(lambda: raw_redis.xlen("a/invoices") == 1, 5, "the group's delivery")
        assert client.status(sent).state == "delivered"
        assert client.metrics().counters["delivered"] == 1
    assert raw_redis.hget(keys.UNSHARDED.lane("a").stats, "delivered") == b"1"
    assert raw_redis.hget(keys.UNSHARDED.stats, "delivered") is None  # not the default's
    with Client(redis_url) as default:
        assert default.metrics().counters["delivered"] == 0


def test_a_herd_in_one_group_does_not_hold_back_another(
    redis_url: str, raw_redis: redis.Redis, lanes: dict[str, Pump]
) -> None:
    due_ms = now_ms() + 3_000
    with Client(redis_url, group="a") as a:
        for _ in range(20):
            a.send_many([{"topic": "herd", "body": b"x", "deliver_at": due_ms}] * 1_000)
    with Client(redis_url, group="b") as b:
        # B's steady traffic: one message every 10 ms from the herd's instant on.
        b.send_many(
            [{"topic": "steady", "body": b"y", "deliver_at": due_ms + 10 * i} for i in range(100)]
        )
    wait_for(lambda: raw_redis.xlen("a/herd") == 20_000, 30, "the herd")
    wait_for(lambda: raw_redis.xlen("b/steady") == 100, 5, "the steady traffic")
    herd, steady = lateness_ms(raw_redis, "a/herd"), lateness_ms(raw_redis, "b/steady")
    assert herd.min() >= 0  # none early
    assert steady.min() >= 0
    # In one lane B's messages would wait behind the whole herd (the herd's own last
    # message is that late); in their own they wait for a pump call of A's or two.
    # (The benchmark measures the 50 ms target on a quiet machine: bench isolation.)
    p50, p99 = np.percentile(steady, 50), np.percentile(steady, 99)
    assert p50 <= 50, (p50, p99, herd.max())
    assert 3 * p99 < herd.max(), (p50, p99, herd.max())


def test_each_quota_refuses_a_send_at_its_bound_and_sends_nothing(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    quotas = Quotas(max_pending=3, max_send_per_s=1_000, max_body_bytes=10, topic_patterns=("t.*",))
    with Client(redis_url) as admin:
        admin.create_group("q", quotas)
    lane = keys.UNSHARDED.lane("q")
    with Client(redis_url, group="q") as client:
        with pytest.raises(QuotaError, match="matches none of the group's topic patterns") as e:
            client.send("other", b"x", delay=60_000)
        assert e.value.quota == "topic_patterns"
        with pytest.raises(QuotaError, match="11 bytes is over the group's 10") as e:
            client.send("t.a", b"x" * 11, delay=60_000)
        assert e.value.quota == "max_body_bytes"
        client.send_many([{"topic": "t.a", "body": b"x", "delay": 30_000}] * 3)  # near: counted
        with pytest.raises(QuotaError, match="3 messages pending and 1 more") as e:
            client.send("t.a", b"x", delay=30_000)
        assert e.value.quota == "max_pending"
        assert raw_redis.zcard(lane.outbox) == 3
    with Client(redis_url) as admin:
        admin.set_group_quotas("q", Quotas(max_send_per_s=5))
    with Client(redis_url, group="q") as client:
        with pytest.raises(QuotaError, match="more would pass the group's 5 a second") as e:
            client.send_many([{"topic": "t.a", "body": b"x", "delay": 30_000}] * 6)
        assert e.value.quota == "max_send_per_s"
        assert raw_redis.zcard(lane.outbox) == 3  # nothing of the refused send


def test_groups_are_listed_and_their_names_are_checked(redis_url: str) -> None:
    with Client(redis_url) as admin:
        created = admin.create_group("billing", Quotas(max_pending=10))
        assert len(created.token) >= 40
        assert created.token.encode() not in b"".join(
            v for _, v in redis.Redis.from_url(redis_url).hgetall(keys.GROUPS).items()
        )
        assert [g.name for g in admin.groups()] == ["billing"]
        with pytest.raises(GroupExistsError):
            admin.create_group("billing")
        with pytest.raises(ValidationError):
            admin.create_group("default")
        with pytest.raises(ValidationError):
            admin.create_group("Bad Name")
        with pytest.raises(GroupNotFoundError):
            admin.set_group_quotas("ghost", Quotas())
    with pytest.raises(ValidationError):
        Client(redis_url, group="Bad Name")
    with Client(redis_url, group="ghost") as ghost, pytest.raises(GroupNotFoundError):
        ghost.send("t", b"x")


def test_the_sink_rejects_a_message_of_a_group_nobody_created_in_its_lane(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    with Client(redis_url) as admin:
        admin.create_group("known")
    due_ms = now_ms() - 1
    rows = [
        Deliver("known/t", "01MCC5RMZ8Z7NX95F0DEET2C6W", b"a", "", "", due_ms, 1),
        Deliver("ghost/t", "01MCC5RMZ8Z7NX95F0DEET2C6X", b"b", "", "", due_ms, 1),
    ]
    store = DeliveryStore.from_url(redis_url)
    write_once(
        store, BatchTask("q", 1, 0), "sink", rows, journal_ttl_s=60, horizon_ms=60_000, shards=1
    )
    assert raw_redis.xlen("known/t") == 1
    assert not raw_redis.exists("ghost/t")
    ((_, reject),) = raw_redis.xrange(keys.UNSHARDED.lane("ghost").rejects)
    assert b"no group 'ghost'" in reject[b"reason"]
    assert reject[b"body"] == b"b"


def test_a_groups_limit_shares_one_rate_among_its_topics_without_their_own(
    redis_url: str, raw_redis: redis.Redis, lanes: dict[str, Pump]
) -> None:
    with Client(redis_url, group="a") as a:
        a.set_topic_limit("*", rate_per_s=500)
        a.set_topic_limit("own", rate_per_s=100_000)
        assert [limit.topic for limit in a.topic_limits()] == ["a/*", "a/own"]
        due_ms = now_ms() + 1_000
        for topic in ("x", "y", "own"):
            a.send_many([{"topic": topic, "body": b"h", "deliver_at": due_ms}] * 600)
    wait_for(lambda: raw_redis.xlen("a/own") == 600, 10, "the topic with its own limit")
    # 600 at 100,000 a second go at once, though the group's 1,200 wait their slots.
    own = lateness_ms(raw_redis, "a/own")
    assert own.min() >= 0
    assert own.max() < 500
    wait_for(lambda: raw_redis.xlen("a/x") + raw_redis.xlen("a/y") == 1_200, 15, "the herd")
    shared = np.concatenate([lateness_ms(raw_redis, "a/x"), lateness_ms(raw_redis, "a/y")])
    assert shared.min() >= 0  # none early
    # 1,200 at 500 a second, shared: the last waits more than 2 s, both topics alike.
    assert shared.max() >= 2_000
    assert lateness_ms(raw_redis, "a/x").max() >= 1_800
    assert lateness_ms(raw_redis, "a/y").max() >= 1_800
    with Client(redis_url, group="a") as a:
        assert a.delete_topic_limit("*")
        assert [limit.topic for limit in a.topic_limits()] == ["a/own"]
