"""The topic streams delayline wrote to, trimmed by their retention (delayline/retention.py).

Deliveries record each topic stream they write in their shard's topics set
(lua/topic_writes.lua), and a dead letter its DLQ stream in the unsharded one.
:class:`TopicStreams` reads those sets, asks each stream which entries its
consumer groups still need (``XINFO GROUPS``, and ``XPENDING`` for a group with
pending entries), and trims its head with lua/trim_topic.lua, a bounded number
of entries a call. What it removes is counted in the stats hash
(``topic_trimmed``, and ``topic_trimmed_unread`` for what a hard cap took from
a group).
"""

from __future__ import annotations

from typing import Any, cast

import redis

from delayline.groups import DEFAULT_GROUP
from delayline.redis import keys, scripts
from delayline.redis.commands import as_text
from delayline.redis.connection import RedisConnection
from delayline.retention import TopicRetention, first_needed


class TopicStreams(RedisConnection):
    """The topic streams to trim, what their groups need, and the trim itself."""

    def registered(self, shards: int) -> list[str]:
        """Every topic stream recorded by the deliveries of a ``shards`` layout (and
        its older counts' keys) and by dead letters."""
        commands = [("SMEMBERS", name) for name in _topic_sets(shards)]
        replies = self.execute(
            commands, action="read the topic streams", transaction=False, errors_ok=False
        )
        found = {as_text(member) for members in replies for member in members}
        return sorted(found)

    def first_needed(self, topic: str) -> str | None:
        """The first entry id of ``topic`` that one of its consumer groups has not read,
        or has read and not acknowledged; None if no group needs any."""

        def read() -> list[tuple[str, str | None]]:
            groups: list[dict[str, Any]] = self._node(topic).xinfo_groups(topic)
            found: list[tuple[str, str | None]] = []
            for group in groups:
                pending = None
                if int(group["pending"]) > 0:
                    summary: dict[str, Any] = self._node(topic).xpending(topic, group["name"])
                    if summary["min"] is not None:
                        pending = as_text(summary["min"])
                found.append((as_text(group["last-delivered-id"]), pending))
            return found

        return first_needed(self._call("read a topic's consumer groups", read))

    def trim(self, topic: str, retention: TopicRetention, needed: str | None) -> scripts.Trimmed:
        """Remove up to ``scripts.TRIM_BATCH`` entries from the head of ``topic`` that
        ``retention`` lets go, none from ``needed`` on but for its hard cap, and count
        them."""
        script = scripts.TRIM_TOPIC
        args = scripts.trim_args(retention, needed)
        trimmed = scripts.trimmed(
            self._script("trim a topic stream", script, script.keys(topic=topic), args)
        )
        removed, unread = trimmed.removed, trimmed.unread
        if removed:

            def count() -> None:
                pipe = self._node(keys.STATS).pipeline(transaction=False)
                pipe.hincrby(keys.STATS, "topic_trimmed", removed)
                if unread:
                    pipe.hincrby(keys.STATS, "topic_trimmed_unread", unread)
                pipe.execute()

            self._call("count trimmed topic entries", count)
        return trimmed

    def forget_expired_minutes(self, shards: int, now_ms: int) -> None:
        """Keep the forecast's minute index of every shard, and of every group's lane in
        it, to its counters' lifetime."""
        names = self._call("read the groups", lambda: self._node(keys.GROUPS).hkeys(keys.GROUPS))
        lanes = [DEFAULT_GROUP, *sorted(name.decode() for name in cast(list[bytes], names))]
        commands = [
            keys.forget_expired_minutes(shard, now_ms)
            for group in lanes
            for shard in keys.read_layout(shards, group)
        ]
        self.execute(commands, action="trim the forecast index", transaction=False, errors_ok=False)

    def forget(self, topic: str, shards: int) -> None:
        """Take ``topic`` off every topics set (it is gone, or not a stream): a later
        delivery to it records it again."""
        commands = [("SREM", name, topic) for name in _topic_sets(shards)]
        self.execute(commands, action="forget a topic stream", transaction=False, errors_ok=False)


def _topic_sets(shards: int) -> list[str]:
    """The topics sets of a ``shards`` layout, the unsharded one (dead letters') first."""
    return list(
        dict.fromkeys([keys.UNSHARDED.topics, *(s.topics for s in keys.read_layout(shards))])
    )


def is_not_a_stream(error: BaseException) -> bool:
    """Whether a trim failed because the key holds another type, or is gone."""
    cause = error.__cause__
    return isinstance(cause, redis.ResponseError) and (
        "WRONGTYPE" in str(cause) or "no such key" in str(cause)
    )
