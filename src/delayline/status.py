"""What became of a message, inferred from the records the pipeline already keeps.

No per-pending-message structure exists in Redis (pending messages live in the
scheduler's RocksDB state), so the answer comes from, in order:

1. the delivery journal: ``delivered`` (with ``delivered_at``), ``cancelled``
   once a cancel dropped the message, or ``rescheduled`` (naming the new id)
   once a reschedule replaced it;
2. the rejected record the sink keeps for a refused send with a valid id;
3. the cancel request recorded with every cancel and reschedule;
4. the id itself, which carries ``deliver_at``: a message not yet due, or due
   so recently that the scheduler may not have reached it, is ``pending``;
   one the scheduler should have settled long ago, with no record, is
   ``unknown`` (never sent, or older than the records' retention).

Pure: no Redis, no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from delayline import ids
from delayline.redis.lua_source import CANCELLED_MARK, RESCHEDULED_MARK
from delayline.timing import format_time, from_epoch_ms

State = Literal["pending", "delivered", "cancelled", "rescheduled", "rejected", "unknown"]

#: A message due less than this long ago may still be in flight (ms).
IN_FLIGHT_GRACE_MS = 30_000


@dataclass(frozen=True)
class MessageStatus:
    """The state of message ``id``; times are epoch ms (``*_at`` give aware datetimes)."""

    id: str
    state: State
    deliver_at_ms: int
    delivered_at_ms: int | None = None
    reason: str | None = None
    #: The id of the message that replaces this one; set once ``rescheduled``.
    rescheduled_to: str | None = None

    @property
    def deliver_at(self) -> datetime:
        """When the message is (or was) due, UTC."""
        return from_epoch_ms(self.deliver_at_ms)

    @property
    def delivered_at(self) -> datetime | None:
        """When it was written to its topic, UTC; None unless delivered."""
        return None if self.delivered_at_ms is None else from_epoch_ms(self.delivered_at_ms)

    def to_json(self) -> dict[str, str | int | None]:
        """The JSON form shared by ``delayline status --json`` and ``GET /messages/{id}``:
        each time as epoch ms and as RFC 3339 UTC."""
        delivered_ms = self.delivered_at_ms
        return {
            "id": self.id,
            "state": self.state,
            "deliver_at": format_time(self.deliver_at_ms),
            "deliver_at_ms": self.deliver_at_ms,
            "delivered_at": None if delivered_ms is None else format_time(delivered_ms),
            "delivered_at_ms": delivered_ms,
            "reason": self.reason,
            "rescheduled_to": self.rescheduled_to,
        }


def infer_status(
    message_id: str,
    *,
    journal: bytes | None,
    rejected: bytes | None,
    cancel_requested: bytes | None,
    last_batch_at_ms: int | None,
    now_ms: int,
) -> MessageStatus:
    """Combine the records of ``message_id`` into its status.

    ``last_batch_at_ms`` is the batch timestamp of the scheduler's last
    completed batch, or the last time its source found nothing due, whichever is
    later (None if it never ran): a message is only ``unknown`` once
    the scheduler has run well past its delivery time. Raises
    InvalidMessageIdError for a malformed id.
    """
    deliver_at_ms = ids.deliver_at_ms_of(message_id)
    if journal == CANCELLED_MARK:
        return MessageStatus(message_id, "cancelled", deliver_at_ms)
    if journal is not None and journal.startswith(RESCHEDULED_MARK):
        new_id = journal.removeprefix(RESCHEDULED_MARK).decode()
        return MessageStatus(message_id, "rescheduled", deliver_at_ms, rescheduled_to=new_id)
    if journal is not None:
        return MessageStatus(message_id, "delivered", deliver_at_ms, delivered_at_ms=int(journal))
    if rejected is not None:
        reason = rejected.decode("utf-8", "replace")
        return MessageStatus(message_id, "rejected", deliver_at_ms, reason=reason)
    if cancel_requested is not None:
        # "<ms>" for a cancel, "<ms>:<new id>:<new due ms>" for a reschedule (and
        # lua_source.VIA_INBOUND after it once a change of the shard count copied it).
        parts = cancel_requested.split(b":")
        if len(parts) >= 3:
            new_id = parts[1].decode()
            return MessageStatus(message_id, "rescheduled", deliver_at_ms, rescheduled_to=new_id)
        return MessageStatus(message_id, "cancelled", deliver_at_ms)
    settled_by_ms = deliver_at_ms + IN_FLIGHT_GRACE_MS
    if now_ms < settled_by_ms or last_batch_at_ms is None or last_batch_at_ms < settled_by_ms:
        return MessageStatus(message_id, "pending", deliver_at_ms)
    return MessageStatus(message_id, "unknown", deliver_at_ms)
