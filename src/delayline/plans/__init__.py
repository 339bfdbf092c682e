"""The SDK's operations as data: which Redis commands each needs, and how to read the replies.

``Client`` and ``AsyncClient`` only execute plans (one pipelined round trip
each); everything else lives here once, with no I/O, in four modules:
:mod:`~delayline.plans.producing` (send, status, cancel),
:mod:`~delayline.plans.consuming` (read, ack, retry, dead-letter, follow),
:mod:`~delayline.plans.observing` (metrics) and :mod:`~delayline.plans.scheduling`
(recurring schedules). A plan's ``parse`` returns either the result or a follow-up
plan (cancel first reads the status, then writes only if the message can still be
cancelled).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from delayline.redis.commands import Command

T = TypeVar("T")


@dataclass(frozen=True)
class Plan(Generic[T]):
    """Commands for one round trip, and what to make of their replies.

    ``transaction`` wraps them in MULTI/EXEC: all or nothing. Replies that are
    errors are passed to ``parse`` as exceptions only when ``errors_ok``.
    """

    commands: list[Command]
    parse: Callable[[list[Any]], T | Plan[T]]
    #: What the plan does, for error messages: "cannot <action>: ...".
    action: str = "talk to Redis"
    transaction: bool = False
    errors_ok: bool = False


def xadd(stream: str, record: Mapping[bytes, bytes]) -> Command:
    """The command that appends ``record`` to ``stream``."""
    return ("XADD", stream, "*", *(part for pair in record.items() for part in pair))
