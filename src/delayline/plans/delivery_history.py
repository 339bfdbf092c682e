"""The plan that reads the delivery history the server keeps (see
:mod:`delayline.history`): every shard's minute hashes, added up."""

from __future__ import annotations

from typing import Any

from delayline.groups import DEFAULT_GROUP
from delayline.history import MINUTE_MS, History, build, window
from delayline.plans import Plan
from delayline.plans.observing import summed
from delayline.redis import keys


def history(
    *, minutes: int, now_ms: int, shards: int = 1, group: str = DEFAULT_GROUP
) -> Plan[History]:
    """Read ``group``'s last ``minutes`` whole minutes up to the one holding ``now_ms``
    (epoch ms), in one round trip. Raises ValidationError for ``minutes`` outside
    1..history.MAX_MINUTES."""
    layout = keys.read_layout(shards, group)
    minutes_ms = window(minutes, now_ms)
    commands = [
        ("HGETALL", shard.history(at_ms // MINUTE_MS)) for at_ms in minutes_ms for shard in layout
    ]

    def parse(replies: list[Any]) -> History:
        n = len(layout)
        per_minute = [summed(replies[i * n : (i + 1) * n]) for i in range(len(minutes_ms))]
        return build(minutes_ms, per_minute)

    return Plan(commands, parse, "read the delivery history")
