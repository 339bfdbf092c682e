"""Plans that produce: send (near path or inbound stream), status, cancel, reschedule."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from delayline import ids
from delayline.chunking import chunks
from delayline.errors import MessageStateError
from delayline.model import Cancel, Message
from delayline.plans import Command, Plan, as_text, xadd
from delayline.redis import keys, scripts
from delayline.status import MessageStatus, infer_status
from delayline.timing import HORIZON_MS


def send(messages: list[Message], *, inbound_shards: int = 1) -> Plan[list[str]]:
    """Schedule the messages, all or none: each one due within the scheduler's horizon
    straight into the outbox, every other one onto its inbound stream."""
    commands = schedule(messages, inbound_shards=inbound_shards)
    return Plan(
        commands, lambda _: [message.id for message in messages], "send messages", transaction=True
    )


#: How long a producer goes by the inbound shard count it read (ms): a drain
#: (``delayline drain``) that changes the count waits this long before it moves
#: what came to the old shards.
SHARDS_REFRESH_MS = 10_000


def send_over_shards(
    messages: list[Message], inbound_shards: int | None, learn: Callable[[int], None]
) -> Plan[list[str]]:
    """:func:`send` over the scheduler's ``inbound_shards``; when not known yet, read them
    first from its config, and tell ``learn`` once it has published them (before that,
    sends go to the default stream, which is always read)."""
    if inbound_shards is not None:
        return send(messages, inbound_shards=inbound_shards)

    def then(replies: list[Any]) -> Plan[list[str]]:
        published = None if replies[0] is None else int(replies[0])
        if published is not None:
            learn(published)
        return send(messages, inbound_shards=published or 1)

    return Plan([("HGET", keys.CONFIG, "inbound_shards")], then, "send messages")


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
    ``retention_ms`` past the message's due minute) in one transaction; the
    request takes the message out of the forecast at once.
    """

    def decide(replies: list[Any]) -> bool | Plan[bool]:
        current = status(message_id, now_ms=now_ms).parse(replies)
        assert isinstance(current, MessageStatus)
        if current.state == "cancelled":
            return True
        if current.state != "pending":
            return False
        cancel = Cancel(message_id, now_ms)
        commands: list[Command] = [
            xadd(keys.INBOUND, cancel.to_record()),
            ("SCRIPT", "LOAD", scripts.CANCEL),
            (
                "EVALSHA",
                scripts.CANCEL_SHA,
                0,
                *scripts.cancel_args(now_ms, retention_ms, [(cancel.id, cancel.deliver_at_ms, "")]),
            ),
        ]
        return Plan(commands, lambda _: True, "record a cancel", transaction=True)

    return Plan(status(message_id, now_ms=now_ms).commands, decide, "read a message's status")


#: Cancels per script call of ``cancel_many``.
CANCELS_PER_CALL = 1_000


def cancel_many(message_ids: list[str], topic: str, *, now_ms: int, retention_ms: int) -> Plan[int]:
    """Cancel messages of ``topic`` (as a listing found them), in one transaction; the plan
    returns how many were still pending. The forecast takes them out of their topic too."""
    commands: list[Command] = [
        xadd(keys.INBOUND, Cancel(message_id, now_ms).to_record()) for message_id in message_ids
    ]
    commands.append(("SCRIPT", "LOAD", scripts.CANCEL))
    for first in range(0, len(message_ids), CANCELS_PER_CALL):
        chunk = message_ids[first : first + CANCELS_PER_CALL]
        cancels = [(message_id, ids.deliver_at_ms_of(message_id), "") for message_id in chunk]
        args = scripts.cancel_args(now_ms, retention_ms, cancels, topic)
        commands.append(("EVALSHA", scripts.CANCEL_SHA, 0, *args))
    calls = -(-len(message_ids) // CANCELS_PER_CALL)
    return Plan(
        commands, lambda replies: sum(replies[-calls:]) if calls else 0, "cancel messages",
        transaction=True,
    )  # fmt: skip


def reschedule(message_id: str, deliver_at_ms: int, *, now_ms: int, retention_ms: int) -> Plan[str]:
    """Replace ``message_id`` with a copy due at ``deliver_at_ms``; the plan returns its id.

    The old message is never delivered and the copy is, once. Raises
    MessageStateError unless the old message is still pending.
    """
    due_ms = ids.deliver_at_ms_of(message_id)
    new_id = ids.new_message_id(deliver_at_ms)
    record = Cancel(message_id, now_ms, rescheduled_to=new_id).to_record()

    def decide(replies: list[Any]) -> Plan[str]:
        current = status(message_id, now_ms=now_ms).parse(replies)
        assert isinstance(current, MessageStatus)
        if current.state != "pending":
            raise MessageStateError(message_id, current.state, "reschedule")
        command: Command = (
            "EVALSHA",
            scripts.RESCHEDULE_SHA,
            8,
            keys.OUTBOX,
            keys.OUTBOX_DATA,
            keys.OUTBOX_BELL,
            keys.INBOUND,
            keys.STATS,
            keys.LATENESS,
            keys.REJECTS,
            keys.CONFIG,
            retention_ms,
            retention_ms // 1000,
            message_id,
            due_ms,
            new_id,
            deliver_at_ms,
            len(record),
            *(part for pair in record.items() for part in pair),
        )
        return Plan([("SCRIPT", "LOAD", scripts.RESCHEDULE), command], done, "reschedule")

    def done(replies: list[Any]) -> str:
        outcome, value = (as_text(part) for part in replies[-1])
        if outcome == "rescheduled":
            return new_id
        # The status said pending, but a delivery, cancel or reschedule came first.
        again = infer_status(
            message_id,
            journal=value.encode() if outcome == "settled" else None,
            rejected=None,
            cancel_requested=value.encode() if outcome == "requested" else None,
            last_batch_at_ms=None,
            now_ms=now_ms,
        )
        raise MessageStateError(message_id, again.state, "reschedule")

    return Plan(status(message_id, now_ms=now_ms).commands, decide, "read a message's status")


#: Messages per near-path script call: a call's own cost in Redis is as large as a
#: message's, and 200 hold Redis for a few milliseconds at most.
NEAR_PER_CALL = 200

#: Record bytes per near-path call, past which a call ends early (it keeps at least one).
NEAR_BYTES_PER_CALL = 8 * 1024 * 1024


def schedule(messages: list[Message], *, inbound_shards: int = 1) -> list[Command]:
    """The commands that schedule ``messages``: XADD to the inbound stream of their shard
    (:func:`keys.inbound_for`: one of ``inbound_shards``), or, for those
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
            commands.append(xadd(keys.inbound_for(message.id, inbound_shards), message.to_record()))
        else:
            near.append(message.to_record())
    if near:
        commands.append(("SCRIPT", "LOAD", scripts.SEND_NEAR))
        commands += [_send_near(records) for records in near_calls(near)]
    return commands


def near_calls(
    records: list[Mapping[bytes, bytes]],
) -> Iterator[Sequence[Mapping[bytes, bytes]]]:
    """``records`` cut into the groups of one near-path call each, in order."""
    return chunks(
        records,
        max_items=NEAR_PER_CALL,
        max_bytes=NEAR_BYTES_PER_CALL,
        size_of=lambda record: sum(len(value) for value in record.values()),
    )


def _send_near(records: Sequence[Mapping[bytes, bytes]]) -> Command:
    # The script reads each message from its inbound record: one encoding, sent once.
    args: list[bytes | str | int] = [HORIZON_MS]
    for record in records:
        args.append(len(record))
        args += [part for pair in record.items() for part in pair]
    return (
        "EVALSHA",
        scripts.SEND_NEAR_SHA,
        6,
        keys.OUTBOX,
        keys.OUTBOX_DATA,
        keys.OUTBOX_BELL,
        keys.INBOUND,
        keys.STATS,
        keys.CONFIG,
        *args,
    )
