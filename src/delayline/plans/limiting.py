"""The plans that set, delete and list topics' delivery limits (see
:mod:`delayline.limits`): each shard that may hold a topic's messages keeps the
limit with its share of the rate, so that its pump can apply it alone; in the lane
of the topic's group."""

from __future__ import annotations

from typing import Any

from delayline.groups import DEFAULT_GROUP, group_of, qualify
from delayline.limits import GROUP_WIDE, TopicLimit, from_stored, limit_field, validate_limit_topic
from delayline.plans import Plan
from delayline.redis import keys


def set_limit(limit: TopicLimit, *, shards: int, read_shards: int) -> Plan[TopicLimit]:
    """Put ``limit`` in every shard used (:func:`keys.read_layout` of ``read_shards``),
    with the share of its rate of each of the ``shards`` current ones."""
    stored = limit.stored(shards)
    lanes = keys.read_layout(read_shards, group_of(limit.topic))
    commands = [("HSET", shard.limits, limit_field(limit.topic), stored) for shard in lanes]
    return Plan(commands, lambda _: limit, "set a delivery limit")


def delete_limit(topic: str, *, read_shards: int) -> Plan[bool]:
    """Take ``topic``'s limit out of every shard used; True if it had one. Raises
    ValidationError for a bad topic."""
    validate_limit_topic(topic)
    lanes = keys.read_layout(read_shards, group_of(topic))
    commands = [("HDEL", shard.limits, limit_field(topic)) for shard in lanes]
    return Plan(commands, lambda replies: any(int(r) for r in replies), "delete a delivery limit")


def limits(group: str = DEFAULT_GROUP) -> Plan[list[TopicLimit]]:
    """Every limit of ``group``'s topics, by topic; the unsharded keys of its lane, which
    every layout writes, hold them all."""

    def parse(replies: list[Any]) -> list[TopicLimit]:
        found = {field.decode(): stored for field, stored in replies[0].items()}
        topics = {field: qualify(group, field) if field == GROUP_WIDE else field for field in found}
        return [from_stored(topics[field], found[field]) for field in sorted(found)]

    command = ("HGETALL", keys.UNSHARDED.lane(group).limits)
    return Plan([command], parse, "read the delivery limits")
