"""Plans that consume a topic: read as a group, reclaim, ack, retry, dead-letter, follow."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from delayline import ids
from delayline.errors import ValidationError
from delayline.model import Message
from delayline.plans import Plan, xadd
from delayline.plans.producing import Published, schedule
from delayline.redis import keys
from delayline.redis.commands import Command, as_text
from delayline.retry import RetryPolicy
from delayline.timing import LAST_MS
from delayline.validation import Limits, decode_headers

log = logging.getLogger(__name__)

#: What a topic's name takes to name its dead-letter stream.
DLQ_SUFFIX = ".DLQ"

#: The longest one read blocks in Redis (ms); a caller that waits longer reads again.
#: Its reply must come within the connection's read timeout (10 s), or a Redis that
#: hangs would hang the consumer: 0 (for ever) is this too.
MAX_BLOCK_MS = 5_000


def _blocking(block_ms: int) -> int:
    return MAX_BLOCK_MS if block_ms <= 0 else min(block_ms, MAX_BLOCK_MS)


@dataclass(frozen=True)
class Entry:
    """A topic stream entry as a consumer group received it."""

    topic: str
    group: str
    entry_id: str
    fields: dict[bytes, bytes] = field(repr=False)

    def text(self, name: str) -> str:
        return self.fields.get(name.encode(), b"").decode("utf-8", "replace")

    def number(self, name: str, default: int = 0) -> int:
        raw = self.fields.get(name.encode())
        return default if raw is None else int(raw)


def ensure_group(topic: str, group: str) -> Plan[None]:
    """Create the consumer group (and the stream) unless it exists."""
    command: Command = ("XGROUP", "CREATE", topic, group, "0", "MKSTREAM")

    def parse(replies: list[Any]) -> None:
        [reply] = replies
        if isinstance(reply, Exception) and "BUSYGROUP" not in str(reply):
            raise reply

    return Plan([command], parse, "create a consumer group", errors_ok=True)


def claim(
    topic: str, group: str, consumer: str, *, min_idle_ms: int, count: int
) -> Plan[list[Entry]]:
    """Take over entries another consumer read but did not ack for ``min_idle_ms``."""
    command: Command = ("XAUTOCLAIM", topic, group, consumer, min_idle_ms, "0-0", "COUNT", count)

    def parse(replies: list[Any]) -> list[Entry]:
        [[_cursor, claimed, *_deleted]] = replies
        return _entries(topic, group, claimed)

    return Plan([command], parse, "reclaim idle entries")


def read(topic: str, group: str, consumer: str, *, count: int, block_ms: int) -> Plan[list[Entry]]:
    """New entries for this consumer, waiting up to ``block_ms`` for some."""
    command: Command = (
        "XREADGROUP",
        "GROUP",
        group,
        consumer,
        "COUNT",
        count,
        "BLOCK",
        _blocking(block_ms),
        "STREAMS",
        topic,
        ">",
    )

    def parse(replies: list[Any]) -> list[Entry]:
        [streams] = replies
        return [entry for _, found in streams or [] for entry in _entries(topic, group, found)]

    return Plan([command], parse, f"read {topic}")


def follow(topic: str, *, after_id: str, count: int, block_ms: int) -> Plan[list[Entry]]:
    """Entries after ``after_id`` ("$": only new ones), read without a consumer group."""
    command: Command = (
        "XREAD", "COUNT", count, "BLOCK", _blocking(block_ms), "STREAMS", topic, after_id
    )  # fmt: skip

    def parse(replies: list[Any]) -> list[Entry]:
        [streams] = replies
        return [entry for _, found in streams or [] for entry in _entries(topic, "", found)]

    return Plan([command], parse, f"read {topic}")


def ack(entry: Entry) -> Plan[None]:
    """Acknowledge: the group is done with this entry."""
    return Plan([_xack(entry)], lambda _: None, "acknowledge a delivery")


def retry(entry: Entry, message: Message, published: Published) -> Plan[bool]:
    """Schedule ``message`` (the entry's next attempt) as the scheduler ``published``, and
    ack the entry, atomically; the plan returns True."""
    commands = [*schedule([message], published), _xack(entry)]
    return Plan(commands, lambda _: True, "reschedule a delivery", transaction=True)


def dead_letter(entry: Entry, reason: str, *, now_ms: int) -> Plan[None]:
    """Move the entry to ``<topic>.DLQ`` with ``reason`` and ack it, atomically; the DLQ
    is recorded among the topic streams the scheduler trims by their retention."""
    fields = dict(entry.fields) | {
        b"reason": reason.encode(),
        b"dead_lettered_at_ms": str(now_ms).encode(),
        b"group": entry.group.encode(),
    }
    dlq = dlq_topic(entry.topic)
    commands = [xadd(dlq, fields), ("SADD", keys.UNSHARDED.topics, dlq), _xack(entry)]
    return Plan(commands, lambda _: None, "dead-letter a delivery", transaction=True)


@dataclass
class Consumer:
    """The plans one consumer of a group cycles through.

    Reclaiming (XAUTOCLAIM) runs at most every ``claim_idle_ms / 2``; in
    between, and whenever nothing was reclaimed, it reads new entries.
    """

    topic: str
    group: str
    name: str
    batch: int
    block_ms: int
    claim_idle_ms: int
    _next_claim_s: float = 0.0

    def ensure_group(self) -> Plan[None]:
        return ensure_group(self.topic, self.group)

    def claim_due(self) -> bool:
        return time.monotonic() >= self._next_claim_s

    def claim(self) -> Plan[list[Entry]]:
        self._next_claim_s = time.monotonic() + self.claim_idle_ms / 2000
        return claim(
            self.topic, self.group, self.name, min_idle_ms=self.claim_idle_ms, count=self.batch
        )

    def read(self) -> Plan[list[Entry]]:
        return read(self.topic, self.group, self.name, count=self.batch, block_ms=self.block_ms)


def dlq_topic(topic: str) -> str:
    """Where a topic's dead letters go."""
    return topic + DLQ_SUFFIX


def next_attempt(entry: Entry, delay_ms: int, *, now_ms: int, limits: Limits) -> Message:
    """The message to schedule when a consumer retries ``entry`` after ``delay_ms``."""
    return Message.create(
        entry.topic,
        entry.fields.get(b"body", b""),
        now_ms=now_ms,
        limits=limits,
        delay=delay_ms,
        key=entry.text("key") or None,
        headers=decode_headers(entry.text("headers"), limits),
        attempt=entry.number("attempt", 1) + 1,
    )


def retry_delay(entry: Entry, policy: RetryPolicy, delay_ms: int | None) -> int | None:
    """The delay before the next attempt: explicit, else the policy's; None once used up."""
    planned = policy.delay_after(entry.number("attempt", 1))
    if planned is None:
        return None
    return planned if delay_ms is None else delay_ms


def foreign_reason(entry: Entry, limits: Limits) -> str | None:
    """Why ``entry`` is not a delivery as delayline writes one (another writer's entry
    in the topic stream), or None if it is: its id, times, attempt and headers parse."""
    if not ids.is_message_id(entry.text("id")):
        return f"not a delayline delivery: id {entry.fields.get(b'id')!r} is not a message id"
    for name, lowest in (("deliver_at_ms", 0), ("delivered_at_ms", 0), ("attempt", 1)):
        raw = entry.fields.get(name.encode(), b"1" if name == "attempt" else b"")
        if not raw.isdigit() or not lowest <= int(raw) <= LAST_MS:
            return f"not a delayline delivery: {name} {raw!r} is not a number from {lowest}"
    try:
        decode_headers(entry.text("headers"), limits)
    except ValidationError as exc:
        return f"not a delayline delivery: {exc}"
    return None


def watchable(entries: list[Entry], limits: Limits) -> list[Entry]:
    """The deliveries among ``entries`` read without a group; another writer's entries
    are left out, each with a warning (a watcher cannot dead-letter what it reads)."""
    kept = []
    for entry in entries:
        reason = foreign_reason(entry, limits)
        if reason is None:
            kept.append(entry)
        else:
            log.warning("skipped entry %s of %s: %s", entry.entry_id, entry.topic, reason)
    return kept


def _entries(topic: str, group: str, found: Iterable[Any]) -> list[Entry]:
    # XAUTOCLAIM reports entries deleted meanwhile with no fields: nothing to deliver.
    return [
        Entry(topic, group, as_text(entry_id), dict(fields)) for entry_id, fields in found if fields
    ]


def _xack(entry: Entry) -> Command:
    return ("XACK", entry.topic, entry.group, entry.entry_id)
