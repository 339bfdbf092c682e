"""The rows the scheduler's sink hands to Redis: deliver, cascade, drop, reject, and a
schedule's runs, revoked runs and runs counted ahead in the forecast.

Plain values, so that the scheduler's pure parts and its tests can build them
without Redis; :meth:`delayline.redis.store.DeliveryStore.write_chunk` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class OutgoingMessage(NamedTuple):
    """A message leaving the scheduler, as the sink writes it."""

    topic: str
    id: str
    body: bytes
    key: str
    headers: str
    deliver_at_ms: int
    attempt: int


class Deliver(OutgoingMessage):
    """A due message, bound for its topic stream."""

    __slots__ = ()


class Cascade(OutgoingMessage):
    """A message handed down from a coarse slot: back to the inbound stream, marked."""

    __slots__ = ()


class Drop(OutgoingMessage):
    """A message that a cancel removed, or a reschedule replaces (the sink then sends its
    copy under the new id, so it travels whole)."""

    __slots__ = ()


class Run(OutgoingMessage):
    """A schedule's run: delivered as Deliver is, and counted into the forecast as it
    is written (no producer's send counted it)."""

    __slots__ = ()


class CountedRun(OutgoingMessage):
    """A schedule's run that its schedule counted ahead in the forecast's minute: as Run,
    but counted into the forecast's second only."""

    __slots__ = ()


class ForecastChange(NamedTuple):
    """A change of the forecast's count of ``topic``'s messages due in the minute
    starting at ``minute_ms`` (epoch ms): a schedule's runs counted ahead."""

    topic: str
    minute_ms: int
    delta: int


class Revoke(NamedTuple):
    """A schedule's run that a change of the schedule cancels: a cancel request for
    it, which the pump checks before it delivers."""

    id: str
    deliver_at_ms: int
    topic: str


class Reject(NamedTuple):
    """A refused inbound record: its original fields plus reason and times.

    ``message_id`` is set when the record carried a well-formed id, so that
    ``status`` can answer "rejected" for it.
    """

    fields: Sequence[tuple[bytes, bytes]]
    reason: str
    message_id: str | None = None


SinkRow = Deliver | Cascade | Drop | Run | CountedRun | ForecastChange | Revoke | Reject


#: A ready stream's entry: its id, and the topic entry's fields plus ``topic``
#: (lua/topic_writes.lua writes it; a flusher to topics outside Redis reads it).
ReadyEntry = tuple[bytes, dict[bytes, bytes]]
