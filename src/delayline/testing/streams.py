"""What a running delayline left in Redis: the deliveries in the topic streams, and the
forecast counters that are not back to zero.

Needs redis-py, which the client install has; nothing heavier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import redis

from delayline.redis import keys
from delayline.redis.inbound import StreamEntry


@dataclass(frozen=True)
class Arrival:
    """One delivered entry of a topic stream; times are epoch ms."""

    message_id: str
    topic: str
    body: bytes
    key: str
    deliver_at_ms: int
    delivered_at_ms: int
    #: Redis's clock when the entry was added (the entry id's first part).
    stream_ms: int


def arrivals(raw: redis.Redis, topics: Sequence[str]) -> list[Arrival]:
    """Every entry of the ``topics`` streams, in stream order per topic.

    ``raw`` must not decode responses. Raises KeyError on an entry that is not a
    delivery (one without ``id``, ``body``, ``key``, ``deliver_at_ms`` or
    ``delivered_at_ms``).
    """
    found = []
    for topic in topics:
        for entry_id, fields in cast(list[StreamEntry], raw.xrange(topic)):
            found.append(
                Arrival(
                    message_id=fields[b"id"].decode(),
                    topic=topic,
                    body=fields[b"body"],
                    key=fields[b"key"].decode(),
                    deliver_at_ms=int(fields[b"deliver_at_ms"]),
                    delivered_at_ms=int(fields[b"delivered_at_ms"]),
                    stream_ms=int(entry_id.split(b"-")[0]),
                )
            )
    return found


def shard_layout(raw: redis.Redis) -> list[keys.ShardKeys]:
    """The shards a reader adds up, for the shard count the scheduler published."""
    shards = int(cast(bytes | None, raw.hget(keys.CONFIG, "inbound_shards")) or 1)
    recorded = cast(bytes | None, raw.hget(keys.CONFIG, keys.SHARD_HISTORY))
    return keys.read_layout(max(keys.shard_history(recorded, shards)))


def forecast_left(raw: redis.Redis) -> dict[str, dict[bytes, int]]:
    """The forecast's counters that are not zero, every shard's added up, by the
    unsharded key's name (a message may be counted in one shard and settled in another).

    Each message changes them once when accepted and once when settled: with every
    message settled, this is empty.
    """
    totals: dict[str, dict[bytes, int]] = {}
    for shard in shard_layout(raw):
        for minute in cast(list[bytes], raw.zrange(shard.forecast_index, 0, -1)):
            for total_key, key in (
                (keys.forecast(int(minute)), shard.forecast(int(minute))),
                (keys.forecast_seconds(int(minute)), shard.forecast_seconds(int(minute))),
            ):
                counts = totals.setdefault(total_key, {})
                found = cast(dict[bytes, bytes], raw.hgetall(key))
                for name, n in found.items():
                    counts[name] = counts.get(name, 0) + int(n)
    left = {}
    for key, counts in totals.items():
        nonzero = {name: n for name, n in counts.items() if n != 0}
        if nonzero:
            left[key] = nonzero
    return left
