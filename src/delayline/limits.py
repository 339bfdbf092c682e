"""A topic's delivery limit, the pure parts: a rate (at most N messages a second,
earliest due first) and a spread (a herd due at one instant may go out over
``[due, due + spread]``). The default is no limit. A group's limit (the topic
GROUP_WIDE, ``*``, or ``<group>/*``) holds for every topic of the group that has
no limit of its own, with one rate shared by all of them.

The pump applies them (redis/lua/delivery_limits.lua): a due message of a
limited topic that may not go yet is held in the outbox until its time, never
before its due time. This module owns the stored form of a limit: each Redis
shard keeps its share of the rate (:func:`shard_rate`), since each shard's pump
delivers its own messages.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from delayline.errors import DecodeError, ValidationError
from delayline.groups import DEFAULT_GROUP, SEPARATOR, group_of, qualify, unqualified
from delayline.timing import parse_duration_ms
from delayline.validation import validate_topic

#: The fields of a stored limit (JSON); lua/delivery_limits.lua reads the last two.
RATE_FIELD = "rate_per_s"
SHARD_RATE_FIELD = "shard_rate_per_s"
SPREAD_FIELD = "spread_ms"

#: The topic of a group's limit, within the group (lua/delivery_limits.lua reads it as
#: the field of the group's lane's limits).
GROUP_WIDE = "*"

#: The highest rate a limit takes (messages a second).
MAX_RATE_PER_S = 1_000_000
#: The longest spread a limit takes (ms): a day.
MAX_SPREAD_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class TopicLimit:
    """``topic``'s limit: at most ``rate_per_s`` deliveries a second (None: no rate),
    and each message held a stable pseudo-random 0 to ``spread_ms`` ms past its due
    time (0: none). Raises ValidationError for a bad topic, rate or spread, or for
    a limit that limits nothing."""

    topic: str
    rate_per_s: int | None = None
    spread_ms: int = 0

    def __post_init__(self) -> None:
        validate_limit_topic(self.topic)
        rate = self.rate_per_s
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE_PER_S
        ):
            raise ValidationError(
                RATE_FIELD,
                "range",
                f"{RATE_FIELD} must be a whole number from 1 to {MAX_RATE_PER_S:,}, got {rate!r}",
            )
        spread = self.spread_ms
        if (
            isinstance(spread, bool)
            or not isinstance(spread, int)
            or not 0 <= spread <= MAX_SPREAD_MS
        ):
            raise ValidationError(
                SPREAD_FIELD,
                "range",
                f"{SPREAD_FIELD} must be a whole number of ms from 0 to {MAX_SPREAD_MS:,} "
                f"(a day), got {spread!r}",
            )
        if rate is None and spread == 0:
            raise ValidationError(
                "limit",
                "empty",
                "a limit needs a rate, a spread, or both (to remove one, delete it)",
            )

    def stored(self, shards: int) -> str:
        """The limit as a shard of ``shards`` keeps it (JSON)."""
        shard_rate = 0 if self.rate_per_s is None else shard_rate_per_s(self.rate_per_s, shards)
        return json.dumps(
            {
                RATE_FIELD: self.rate_per_s,
                SHARD_RATE_FIELD: shard_rate,
                SPREAD_FIELD: self.spread_ms,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """The limit as the API and the CLI show it."""
        return {"topic": self.topic, RATE_FIELD: self.rate_per_s, SPREAD_FIELD: self.spread_ms}


def validate_limit_topic(topic: object) -> str:
    """Return ``topic`` if a limit can be set on it: a topic, or a group's limit
    (GROUP_WIDE, or ``<group>/*``). Raises ValidationError otherwise."""
    if isinstance(topic, str) and unqualified(topic) == GROUP_WIDE:
        group = group_of(topic)
        if topic == qualify(group, GROUP_WIDE) and (group == DEFAULT_GROUP or SEPARATOR in topic):
            return topic
    return validate_topic(topic)


def limit_field(topic: str) -> str:
    """The field of a limit in its group's lane's limits hash: the topic, or
    GROUP_WIDE for the group's limit."""
    return GROUP_WIDE if unqualified(topic) == GROUP_WIDE else topic


def shard_rate_per_s(rate_per_s: int, shards: int) -> int:
    """Each of ``shards`` shards' share of ``rate_per_s``, rounded up (a message's shard
    is a hash of its id, so each shard gets about as many)."""
    return math.ceil(rate_per_s / shards)


def from_stored(topic: str, stored: str | bytes) -> TopicLimit:
    """The limit that :meth:`TopicLimit.stored` wrote for ``topic``. Raises DecodeError."""
    try:
        fields = json.loads(stored)
        return TopicLimit(topic, fields[RATE_FIELD], fields[SPREAD_FIELD])
    except (ValueError, TypeError, KeyError) as error:
        raise DecodeError(f"the stored limit of topic {topic!r} is malformed: {error}") from None


def spread_ms_of(spread: timedelta | int | str | None) -> int:
    """A spread given as a timedelta, whole ms, or a duration text ("30s"), in ms; None
    is 0. Raises ValidationError for another type or a negative or fractional value."""
    if spread is None:
        return 0
    if isinstance(spread, str):
        return parse_duration_ms(spread, SPREAD_FIELD)
    if isinstance(spread, timedelta):
        spread_ms = spread / timedelta(milliseconds=1)
        if spread_ms != int(spread_ms):
            raise ValidationError(SPREAD_FIELD, "whole_ms", f"{SPREAD_FIELD} must be whole ms")
        return int(spread_ms)
    return spread
