"""The ARGV builders and reply parsers of the SDK's scripts that take more than a list:
reschedule.lua and list_outbox.lua (declared in :mod:`delayline.redis.scripts`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from delayline import ids
from delayline.listing import PendingMessage
from delayline.redis.commands import as_text


def reschedule_args(
    message_id: str,
    new_id: str,
    new_deliver_at_ms: int,
    *,
    retention_ms: int,
    horizon_ms: int,
    record: Mapping[bytes, bytes],
) -> list[object]:
    """RESCHEDULE's arguments: replace ``message_id`` by ``new_id`` due at
    ``new_deliver_at_ms``; ``record`` is the reschedule's inbound record, appended
    if the message does not wait in the outbox."""
    return [
        retention_ms,
        retention_ms // 1000,
        message_id,
        ids.deliver_at_ms_of(message_id),
        new_id,
        new_deliver_at_ms,
        horizon_ms,
        len(record),
        *(part for pair in record.items() for part in pair),
    ]


def reschedule_outcome(reply: Sequence[bytes | str]) -> tuple[str, str]:
    """RESCHEDULE's reply as (outcome, value): ("rescheduled", ""), ("settled", the
    journal's value) or ("requested", the cancel request already recorded)."""
    outcome, value = (as_text(part) for part in reply)
    return outcome, value


def outbox_page(reply: Sequence[Any]) -> tuple[int, list[PendingMessage]]:
    """LIST_OUTBOX's reply: the rank to go on from (-1: the range is done), and the
    entries found."""
    next_rank, *values = reply
    found = []
    for i in range(0, len(values), 6):
        entry_id, topic, key, due, attempt, size = values[i : i + 6]
        found.append(
            PendingMessage(
                as_text(entry_id),
                as_text(topic),
                as_text(key),
                int(due),
                int(attempt),
                int(size),
                "outbox",
            )
        )
    return int(next_rank), found
