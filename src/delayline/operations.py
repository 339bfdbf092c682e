"""The SDK's operations as data: which Redis commands each needs, and how to read the replies.

``Client`` and ``AsyncClient`` only execute plans (one pipelined round trip
each); everything else lives here once, with no I/O. A plan's ``parse`` returns
either the result or a follow-up plan (cancel first reads the status, then
writes only if the message can still be cancelled).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from delayline import ids
from delayline.chunking import chunk_end
from delayline.metrics import COUNTERS, render_prometheus
from delayline.model import Cancel, Message
from delayline.retry import RetryPolicy
from delayline.status import MessageStatus, infer_status
from delayline.timing import HORIZON_MS
from delayline.transports import keys, redis_scripts
from delayline.validation import Limits, decode_headers

T = TypeVar("T")
Command = tuple[Any, ...]


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


# -- producing ---------------------------------------------------------------------------------


def send(messages: list[Message]) -> Plan[list[str]]:
    """Schedule the messages, all or none: each one due within the scheduler's horizon
    straight into the outbox, every other one onto the inbound stream."""
    commands = _schedule(messages)
    return Plan(
        commands, lambda _: [message.id for message in messages], "send messages", transaction=True
    )


def status(message_id: str, *, now_ms: int) -> Plan[MessageStatus]:
    """Read every record that tells what became of ``message_id``.

    Raises InvalidMessageIdError for a malformed id.
    """
    due_ms = ids.deliver_at_ms_of(message_id)
    commands: list[Command] = [
        ("HGET", keys.journal(due_ms), message_id),
        ("HGET", keys.rejected(due_ms), message_id),
        ("HGET", keys.cancel_requests(due_ms), message_id),
        ("HMGET", keys.HEARTBEAT, "last_batch_at_ms", "settled_at_ms"),
    ]

    def parse(replies: list[Any]) -> MessageStatus:
        journal, rejected, cancel_requested, beats = replies
        # An idle scheduler runs no batch; its source records when it found nothing due.
        seen = [int(beat) for beat in beats if beat is not None]
        return infer_status(
            message_id,
            journal=journal,
            rejected=rejected,
            cancel_requested=cancel_requested,
            last_batch_at_ms=max(seen, default=None),
            now_ms=now_ms,
        )

    return Plan(commands, parse, "read a message's status")


def cancel(message_id: str, *, now_ms: int, retention_ms: int) -> Plan[bool]:
    """Cancel ``message_id`` unless it was already delivered, rejected, or is unknown.

    Writes the cancel record and a cancel request (for ``status``, kept
    ``retention_ms`` past the message's due minute) in one transaction.
    """
    due_ms = ids.deliver_at_ms_of(message_id)

    def decide(replies: list[Any]) -> bool | Plan[bool]:
        current = status(message_id, now_ms=now_ms).parse(replies)
        assert isinstance(current, MessageStatus)
        if current.state == "cancelled":
            return True
        if current.state != "pending":
            return False
        requests = keys.cancel_requests(due_ms)
        expire_at_s = (keys.bucket_end_ms(due_ms) + retention_ms) // 1000
        commands: list[Command] = [
            _xadd(keys.INBOUND, Cancel(message_id, now_ms).to_record()),
            ("HSET", requests, message_id, now_ms),
            ("EXPIREAT", requests, expire_at_s),
        ]
        return Plan(commands, lambda _: True, "record a cancel", transaction=True)

    return Plan(status(message_id, now_ms=now_ms).commands, decide, "read a message's status")


# -- observing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metrics:
    """The scheduler's counters, histograms and heartbeat, read at ``read_at_ms``."""

    stats: dict[str, int]
    lateness: dict[str, int]
    batch_duration: dict[str, int]
    heartbeat: dict[str, str]
    read_at_ms: int
    #: Messages in the outbox: due within the horizon, waiting for the pump.
    outbox: int = 0

    @property
    def counters(self) -> dict[str, int]:
        """Each counter by its public name (see metrics.COUNTERS)."""
        return {counter.name: self.stats.get(counter.field, 0) for counter in COUNTERS}

    @property
    def pending(self) -> int:
        """Accepted messages neither delivered, removed by a cancel, nor duplicates: a
        cancelled message counts until its time comes and the cancel is applied."""
        s = self.stats
        return s.get("accepted", 0) - sum(
            s.get(k, 0) for k in ("delivered", "dropped", "duplicates")
        )

    @property
    def last_batch_age_ms(self) -> int | None:
        """How long ago the scheduler last reported a completed batch; None if never."""
        updated = self.heartbeat.get("updated_at_ms")
        return None if updated is None else self.read_at_ms - int(updated)

    def prometheus(self) -> str:
        """These metrics in the Prometheus text format."""
        return render_prometheus(
            self.stats, self.lateness, self.batch_duration, self.pending, self.outbox
        )


def metrics(*, now_ms: int) -> Plan[Metrics]:
    """Read every counter and histogram the scheduler keeps, in one round trip."""
    sources = (keys.STATS, keys.LATENESS, keys.BATCH_DURATION, keys.HEARTBEAT)
    commands: list[Command] = [("HGETALL", key) for key in sources]
    commands.append(("ZCARD", keys.OUTBOX))

    def parse(replies: list[Any]) -> Metrics:
        stats, lateness, batches, heartbeat = (
            {_text(name): _text(value) for name, value in reply.items()} for reply in replies[:-1]
        )
        return Metrics(
            stats={name: int(value) for name, value in stats.items()},
            lateness={name: int(value) for name, value in lateness.items()},
            batch_duration={name: int(value) for name, value in batches.items()},
            heartbeat=heartbeat,
            read_at_ms=now_ms,
            outbox=int(replies[-1]),
        )

    return Plan(commands, parse, "read metrics")


# -- consuming ---------------------------------------------------------------------------------


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
        block_ms,
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
    command: Command = ("XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS", topic, after_id)

    def parse(replies: list[Any]) -> list[Entry]:
        [streams] = replies
        return [entry for _, found in streams or [] for entry in _entries(topic, "", found)]

    return Plan([command], parse, f"read {topic}")


def ack(entry: Entry) -> Plan[None]:
    """Acknowledge: the group is done with this entry."""
    return Plan([_xack(entry)], lambda _: None, "acknowledge a delivery")


def retry(entry: Entry, message: Message) -> Plan[None]:
    """Schedule ``message`` (the entry's next attempt) and ack the entry, atomically."""
    commands = [*_schedule([message]), _xack(entry)]
    return Plan(commands, lambda _: None, "reschedule a delivery", transaction=True)


def dead_letter(entry: Entry, reason: str, *, now_ms: int) -> Plan[None]:
    """Move the entry to ``<topic>.DLQ`` with ``reason`` and ack it, atomically."""
    fields = dict(entry.fields) | {
        b"reason": reason.encode(),
        b"dead_lettered_at_ms": str(now_ms).encode(),
        b"group": entry.group.encode(),
    }
    commands = [_xadd(dlq_topic(entry.topic), fields), _xack(entry)]
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
    return f"{topic}.DLQ"


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


def _entries(topic: str, group: str, found: Iterable[Any]) -> list[Entry]:
    # XAUTOCLAIM reports entries deleted meanwhile with no fields: nothing to deliver.
    return [
        Entry(topic, group, _text(entry_id), dict(fields)) for entry_id, fields in found if fields
    ]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


#: Messages per near-path script call: a call's own cost in Redis is as large as a
#: message's, and 200 hold Redis for a few milliseconds at most.
NEAR_PER_CALL = 200
#: Record bytes per near-path call, past which a call ends early (it keeps at least one).
NEAR_BYTES_PER_CALL = 8 * 1024 * 1024


def _schedule(messages: list[Message]) -> list[Command]:
    """The commands that schedule ``messages``: XADD to the inbound stream, or, for those
    due within HORIZON_MS of their ``sent_at_ms``, the outbox script (which checks again,
    by Redis's clock and against the horizon the scheduler published), up to
    NEAR_PER_CALL of them a call, loaded before those calls in the same transaction.

    A message past the horizon skips the script: it is written once, not twice. The
    Spark path takes a trigger plus a batch (seconds under load, tens of seconds
    while Spark restarts) to reach the outbox; a message due sooner would be late.
    """
    commands: list[Command] = []
    near: list[Mapping[bytes, bytes]] = []
    for message in messages:
        if message.deliver_at_ms - message.sent_at_ms > HORIZON_MS:
            commands.append(_xadd(keys.INBOUND, message.to_record()))
        else:
            near.append(message.to_record())
    if near:
        commands.append(("SCRIPT", "LOAD", redis_scripts.SEND_NEAR))
        commands += [_send_near(records) for records in _near_calls(near)]
    return commands


def _near_calls(records: list[Mapping[bytes, bytes]]) -> Iterator[list[Mapping[bytes, bytes]]]:
    """``records`` cut into the groups of one near-path call each, in order."""
    start = 0
    while start < len(records):
        end = chunk_end(
            records,
            start,
            max_items=NEAR_PER_CALL,
            max_bytes=NEAR_BYTES_PER_CALL,
            size_of=lambda record: sum(len(value) for value in record.values()),
        )
        yield records[start:end]
        start = end


def _send_near(records: list[Mapping[bytes, bytes]]) -> Command:
    # The script reads each message from its inbound record: one encoding, sent once.
    args: list[bytes | str | int] = [HORIZON_MS]
    for record in records:
        args.append(len(record))
        args += [part for pair in record.items() for part in pair]
    return (
        "EVALSHA",
        redis_scripts.SEND_NEAR_SHA,
        6,
        keys.OUTBOX,
        keys.OUTBOX_DATA,
        keys.OUTBOX_BELL,
        keys.INBOUND,
        keys.STATS,
        keys.CONFIG,
        *args,
    )


def _xadd(stream: str, record: Mapping[bytes, bytes]) -> Command:
    return ("XADD", stream, "*", *(part for pair in record.items() for part in pair))


def _xack(entry: Entry) -> Command:
    return ("XACK", entry.topic, entry.group, entry.entry_id)
