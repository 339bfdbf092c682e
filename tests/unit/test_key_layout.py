"""The key layout is one that Redis Cluster accepts: each shard's keys hash to a slot
of their own, by the shard's hash tag."""

from __future__ import annotations

from delayline.redis import keys


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
