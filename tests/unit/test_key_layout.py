"""The key layout is one that Redis Cluster accepts: each shard's keys hash to a slot
of their own, by the shard's hash tag."""

from __future__ import annotations

import pytest

from delayline.errors import DelaylineError
from delayline.redis import keys, scripts


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM, Redis Cluster's key hash."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def slot(key: str) -> int:
    """The Redis Cluster hash slot of ``key`` (its hash tag, if it has one)."""
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key.encode()) % 16384


def test_crc16_is_redis_clusters() -> None:
    # The examples of the Redis Cluster specification.
    assert crc16(b"123456789") == 0x31C3
    assert slot("{user1000}.following") == slot("{user1000}.followers")


def test_each_inbound_shard_is_tagged_with_its_shard() -> None:
    for shard in range(64):
        assert slot(keys.inbound_shard(shard)) == slot(f"delayline:anything:{{{shard}}}")
    assert len({slot(keys.inbound_shard(shard)) for shard in range(16)}) == 16


def test_the_streams_read_are_the_default_one_then_each_shard() -> None:
    assert keys.inbound_streams(1) == [keys.INBOUND]
    assert keys.inbound_streams(3) == [
        keys.INBOUND,
        "delayline:inbound:{0}",
        "delayline:inbound:{1}",
        "delayline:inbound:{2}",
    ]
    assert keys.inbound_for("01M87N869M4T14JMZ993P04STH", 1) == keys.INBOUND


#: The topic of the topic scripts' keys below.
TOPIC = "orders"


def given_keys(shard: keys.ShardKeys) -> dict[str, str]:
    """Each key a caller gives a script by name, as the callers build it in ``shard``."""
    return {
        "marker": shard.sink_marker("query", 3, "handoff"),
        "ingest_marker": shard.ingest_marker("query", 3),
        "topic": TOPIC,
        "written": keys.topic_written(TOPIC),
    }


def test_every_key_a_script_declares_is_in_its_shards_slot_or_its_topics() -> None:
    slots = set()
    for n in range(8):
        shard = keys.shard_keys(n)
        home = slot(shard.namespace)
        for script in scripts.ALL:
            # The scheduler's lease and the group registry are in slots of their own.
            if script in (scripts.LEASE, scripts.CREATE_GROUP, scripts.TAKE_SENDS):
                continue
            given = {k: v for k, v in given_keys(shard).items() if k in script.key_names}
            declared = zip(script.key_names, script.keys(shard, **given), strict=True)
            for name, key in declared:
                expected = slot(TOPIC) if name in script.topic_keys else home
                assert slot(key) == expected, (script.file, name, key)
            # The libraries name the shard's other keys from its namespace, the last key.
            if "namespace" in script.key_names:
                assert script.key_names[-1] == "namespace", script.file
        # The keys the scripts build from the namespace and a minute.
        built = [shard.journal(0), shard.cancel_requests(0), shard.rejected(0)]
        built += [shard.forecast(1), shard.forecast_seconds(1), shard.forecast_index]
        built += [shard.ready, shard.target, shard.topics, shard.fence]
        assert {slot(key) for key in built} == {home}, shard
        lane = shard.lane("billing")
        lane_keys = [lane.outbox, lane.outbox_data, lane.stats, lane.journal(0), lane.limits]
        lane_keys += [lane.forecast(1), lane.history(1), lane.rejects, lane.ready]
        assert {slot(key) for key in lane_keys} == {home}, lane
        # A lane shares its shard's fence, target and topics set.
        assert (lane.fence, lane.target, lane.topics) == (shard.fence, shard.target, shard.topics)
        slots.add(home)
    assert len(slots) == 8


def test_the_group_registry_keys_share_a_slot() -> None:
    registry = {slot(keys.GROUPS), slot(keys.GROUP_TOKENS), slot(keys.group_sends("a", 1))}
    assert len(registry) == 1
    assert scripts.CREATE_GROUP.keys(groups=keys.GROUPS, tokens=keys.GROUP_TOKENS)


def test_the_lease_and_its_token_counter_share_a_slot() -> None:
    assert slot(keys.LEASE) == slot(keys.LEASE_TOKEN)
    assert scripts.LEASE.keys(lease=keys.LEASE, token=keys.LEASE_TOKEN)


def test_a_script_refuses_keys_it_does_not_declare_or_lacks() -> None:
    with pytest.raises(DelaylineError, match="no key"):
        scripts.PUMP.keys(keys.UNSHARDED, topic="orders")
    with pytest.raises(DelaylineError, match="no key marker"):
        scripts.WRITE_CHUNK.keys(keys.UNSHARDED)
    with pytest.raises(DelaylineError, match="takes 1 keys"):
        scripts.CANCEL.command(("a", "b"), ())


def test_one_shard_keeps_the_unsharded_names() -> None:
    assert keys.layout(1) == [keys.UNSHARDED]
    assert keys.keys_of("01M87N869M4T14JMZ993P04STH", 1) == keys.UNSHARDED
    assert (keys.UNSHARDED.outbox, keys.UNSHARDED.journal(60_000)) == (
        "delayline:outbox",
        "delayline:delivered:60",
    )
    assert keys.read_layout(2) == [keys.UNSHARDED, keys.shard_keys(0), keys.shard_keys(1)]


def test_a_sharded_deliverys_steps_each_keep_to_one_slot() -> None:
    for topic in ("orders", "a.b:c-1", "x"):
        assert slot(keys.topic_written(topic) + ":28000000") == slot(topic)
    for n in range(8):
        shard = keys.shard_keys(n)
        settle = scripts.SETTLE_READY.keys(shard)
        assert {slot(key) for key in settle} == {slot(shard.namespace)}


def test_the_shard_history_keeps_each_count_once_the_current_last() -> None:
    assert keys.shard_history(None, 2) == (2,)
    assert keys.shard_history(b"1,4,2", 4) == (1, 2, 4)
    assert keys.shard_history("1,4", 4) == (1, 4)
    assert keys.shard_history(keys.shard_history_text((1, 3, 2)), 2) == (1, 3, 2)
