"""The send of a group's client, within the group's quotas (see :mod:`delayline.groups`).

Each quota refuses the whole send, before anything is written, with QuotaError:

- ``topic_patterns`` and ``max_body_bytes`` are checked here, with no round trip;
- ``max_pending``: the group's pending messages (its lanes' counters, as
  ``metrics`` reads them) plus the send must not pass it. A far send is counted
  once the scheduler takes it in (within a batch, about a second), so senders
  racing within that second may pass the bound by what they send meanwhile;
- ``max_send_per_s``: a counter per group and second, taken atomically
  (lua/take_sends.lua) just before the send. A send refused later (by Redis)
  keeps its share taken.
"""

from __future__ import annotations

import math
from typing import Any

from delayline.errors import QuotaError
from delayline.groups import Group, unqualified
from delayline.model import Message
from delayline.plans import Plan, producing
from delayline.plans.observing import summed
from delayline.plans.producing import Published
from delayline.redis import keys, scripts
from delayline.timing import now_ms

#: How long a group's send counter of a second is kept (s).
SENDS_TTL_S = 5


def send_within(group: Group, messages: list[Message], published: Published) -> Plan[list[str]]:
    """:func:`producing.send` of ``messages`` (of ``group``'s topics) once each of the
    group's quotas allows it. Raises QuotaError for the first quota it passes."""
    quotas = group.quotas
    for message in messages:
        topic = unqualified(message.topic)
        if not quotas.allows_topic(topic):
            raise QuotaError(
                group.name,
                "topic_patterns",
                f"topic {topic!r} matches none of the group's topic patterns "
                f"({', '.join(quotas.topic_patterns)})",
            )
        if quotas.max_body_bytes is not None and len(message.body) > quotas.max_body_bytes:
            raise QuotaError(
                group.name,
                "max_body_bytes",
                f"a body of {len(message.body):,} bytes is over the group's "
                f"{quotas.max_body_bytes:,}",
            )
    if quotas.max_pending is None:
        return _take_rate(group, messages, published)
    lanes = keys.read_layout(published.read_shards, group.name)

    def check_pending(replies: list[Any]) -> Plan[list[str]]:
        stats = summed(replies)
        pending = stats.get("accepted", 0) - sum(
            stats.get(counter, 0) for counter in ("delivered", "dropped", "duplicates")
        )
        assert quotas.max_pending is not None
        if pending + len(messages) > quotas.max_pending:
            raise QuotaError(
                group.name,
                "max_pending",
                f"{pending:,} messages pending and {len(messages):,} more would pass the "
                f"group's {quotas.max_pending:,}",
            )
        return _take_rate(group, messages, published)

    commands = [("HGETALL", lane.stats) for lane in lanes]
    return Plan(list(commands), check_pending, "read the group's pending messages")


def _take_rate(group: Group, messages: list[Message], published: Published) -> Plan[list[str]]:
    rate = group.quotas.max_send_per_s
    if rate is None:
        return producing.send(messages, published)
    second = math.floor(now_ms() / 1000)
    counter = keys.group_sends(group.name, second)
    command = scripts.TAKE_SENDS.command(
        scripts.TAKE_SENDS.keys(counter=counter), [len(messages), rate, SENDS_TTL_S]
    )

    def taken(replies: list[Any]) -> Plan[list[str]]:
        ok, count = (int(value) for value in replies[0])
        if not ok:
            raise QuotaError(
                group.name,
                "max_send_per_s",
                f"{count:,} sent this second and {len(messages):,} more would pass "
                f"the group's {rate:,} a second",
            )
        return producing.send(messages, published)

    return Plan([command], taken, "take the group's send quota")
