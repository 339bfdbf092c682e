"""Plans that produce: send (near path or inbound stream), status, cancel, reschedule."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from delayline import ids
from delayline.chunking import chunks
from delayline.errors import ConfigurationError, MessageStateError
from delayline.groups import DEFAULT_GROUP, group_of
from delayline.model import Cancel, Message
from delayline.plans import Plan, xadd
from delayline.redis import keys, script_args, scripts
from delayline.redis.commands import Command
from delayline.status import MessageStatus, infer_status
from delayline.timing import HORIZON_MS, is_near
from delayline.validation import Limits, check_horizon

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Published:
    """What the running scheduler tells producers (``delayline:config``): its Redis shard
    count, its horizon (ms), and every shard count used, the current one last (see
    redis/layout.py). The defaults stand in until a scheduler has published."""

    shards: int = 1
    horizon_ms: int = HORIZON_MS
    history: tuple[int, ...] = (1,)
    #: Whether Redis is a cluster: there the unsharded keys, which share no hash
    #: slot, can take plain commands only (see :attr:`scripts_ok`).
    on_cluster: bool = False
    #: The group the client acts for (not the scheduler's to publish): the lane whose
    #: keys a plan reads and writes, for a message known by its id only.
    group: str = DEFAULT_GROUP

    @property
    def scripts_ok(self) -> bool:
        """Whether a shard's scripts can run: on one server always; on a cluster once a
        scheduler has published a sharded layout, whose shards each share a slot."""
        return not self.on_cluster or self.shards > 1

    def require_scripts(self, action: str) -> None:
        """Raise ConfigurationError, saying what to do, unless :attr:`scripts_ok`."""
        if not self.scripts_ok:
            raise ConfigurationError(
                f"cannot {action} yet: no delayline scheduler has published its Redis shards "
                "on this Redis Cluster; start delayline run with this --redis-url first"
            )

    @property
    def read_shards(self) -> int:
        """The count whose layout (:func:`keys.read_layout`) holds every shard used."""
        return max(self.history)


#: How long a producer goes by the config it read (ms): a scheduler restarted with
#: another horizon, or the first one to publish its shard count, reaches producers
#: within it. (A stale horizon is safe; a stale shard count is too, as far as
#: redis/layout.py goes: see docs/scaling.md on changing it.)
SHARDS_REFRESH_MS = 10_000


def with_published(
    build: Callable[[Published], Plan[T]],
    known: Published | None,
    learn: Callable[[Published], None],
    *,
    on_cluster: bool = False,
) -> Plan[T]:
    """``build(known)``; when not known yet, read the scheduler's config first, and tell
    ``learn`` once a scheduler has published it (before that, the defaults stand in:
    sends go to the default stream, which is always read, and the unsharded keys).
    ``on_cluster``: Redis is a cluster (see :attr:`Published.scripts_ok`)."""
    if known is not None:
        return build(known)
    unpublished = Published(on_cluster=on_cluster)

    def then(replies: list[Any]) -> Plan[T]:
        shards, horizon_ms, history = replies[0]
        if shards is None and horizon_ms is None:
            return build(unpublished)
        count = 1 if shards is None else int(shards)
        published = Published(
            count,
            HORIZON_MS if horizon_ms is None else int(horizon_ms),
            keys.shard_history(history, count),
            on_cluster=on_cluster,
        )
        learn(published)
        return build(published)

    command = ("HMGET", keys.CONFIG, "inbound_shards", "horizon_ms", keys.SHARD_HISTORY)
    # An error names what the caller asked for: "cannot send messages", not the read.
    return Plan([command], then, _action_of(build, unpublished))


def _action_of(build: Callable[[Published], Plan[T]], published: Published) -> str:
    """What ``build``'s plan does, for the read before it: its own action."""
    try:
        return build(published).action
    except ConfigurationError:  # it refuses before the config is read: say what it was for
        return "read the scheduler's config"


def send(messages: list[Message], published: Published = Published()) -> Plan[list[str]]:
    """Schedule the messages, all or none (one transaction, which :func:`schedule` keeps
    whole even on a server that lost its scripts): each one due within the scheduler's
    horizon straight into its shard's outbox, every other one onto its inbound stream."""
    commands = schedule(messages, published)
    return Plan(
        commands, lambda _: [message.id for message in messages], "send messages", transaction=True
    )


def status(
    message_id: str, *, now_ms: int, published: Published = Published()
) -> Plan[MessageStatus]:
    """Read every record that tells what became of ``message_id``: in its shard under the
    current shard count, and under each older one (each record's first found).

    Raises InvalidMessageIdError for a malformed id.
    """
    due_ms = ids.deliver_at_ms_of(message_id)
    counts = (published.shards, *reversed(published.history))
    shards = list(
        dict.fromkeys(keys.keys_of(message_id, count, published.group) for count in counts)
    )
    commands: list[Command] = [("HMGET", keys.HEARTBEAT, "last_batch_at_ms", "settled_at_ms")]
    for shard in shards:
        commands += [
            ("HGET", shard.journal(due_ms), message_id),
            ("HGET", shard.rejected(due_ms), message_id),
            ("HGET", shard.cancel_requests(due_ms), message_id),
        ]

    def parse(replies: list[Any]) -> MessageStatus:
        beats = replies[0]
        journal, rejected, cancel_requested = (
            next((found for found in replies[first::3] if found is not None), None)
            for first in (1, 2, 3)
        )
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


def cancel(
    message_id: str,
    *,
    now_ms: int,
    retention_ms: int,
    published: Published = Published(),
    limits: Limits | None = None,
) -> Plan[bool]:
    """Cancel ``message_id`` unless it was already delivered, rejected, or is unknown.

    Writes the cancel record and a cancel request (for ``status``, kept
    ``retention_ms`` past the message's due minute) in one transaction, in the
    message's shard; the request takes the message out of the forecast at once.
    Raises ValidationError for an id no send could have made: due further than
    ``limits.max_delay_ms`` from now (a request for it would be kept until then).
    """
    check_horizon(
        ids.deliver_at_ms_of(message_id), now_ms=now_ms, limits=limits or Limits(), field="id"
    )
    published.require_scripts("cancel a message")
    shard = keys.keys_of(message_id, published.shards, published.group)
    read = status(message_id, now_ms=now_ms, published=published)

    def decide(replies: list[Any]) -> bool | Plan[bool]:
        current = read.parse(replies)
        assert isinstance(current, MessageStatus)
        if current.state == "cancelled":
            return True
        if current.state != "pending":
            return False
        cancel = Cancel(message_id, now_ms)
        args = scripts.cancel_args(now_ms, retention_ms, [(cancel.id, cancel.deliver_at_ms, "")])
        commands: list[Command] = [
            xadd(shard.inbound, cancel.to_record()),
            scripts.CANCEL.command(scripts.CANCEL.keys(shard), args),
        ]
        return Plan(commands, lambda _: True, "record a cancel", transaction=True)

    return Plan(read.commands, decide, "read a message's status")


#: Cancels per script call of ``cancel_many``.
CANCELS_PER_CALL = 1_000


def cancel_many(
    message_ids: list[str], topic: str, *, now_ms: int, retention_ms: int, shards: int = 1
) -> Plan[int]:
    """Cancel messages of ``topic`` (as a listing found them), in one transaction; the plan
    returns how many were still pending. The forecast takes them out of their topic too."""
    commands: list[Command] = []
    taken: list[int] = []
    lanes = keys.by_shard(message_ids, shards, lambda each: each, lambda _: group_of(topic))
    for shard, shard_ids in lanes.items():
        commands += [xadd(shard.inbound, Cancel(each, now_ms).to_record()) for each in shard_ids]
        for first in range(0, len(shard_ids), CANCELS_PER_CALL):
            chunk = shard_ids[first : first + CANCELS_PER_CALL]
            cancels = [(message_id, ids.deliver_at_ms_of(message_id), "") for message_id in chunk]
            args = scripts.cancel_args(now_ms, retention_ms, cancels, topic)
            taken.append(len(commands))
            commands.append(scripts.CANCEL.command(scripts.CANCEL.keys(shard), args))
    return Plan(
        commands, lambda replies: sum(replies[index] for index in taken), "cancel messages",
        transaction=True,
    )  # fmt: skip


def reschedule(
    message_id: str,
    deliver_at_ms: int,
    *,
    now_ms: int,
    retention_ms: int,
    published: Published = Published(),
    limits: Limits | None = None,
) -> Plan[str]:
    """Replace ``message_id`` with a copy due at ``deliver_at_ms``; the plan returns its id.

    The old message is never delivered and the copy is, once. The copy's id is
    drawn in the old message's shard, where the script that sends it runs.
    Raises MessageStateError unless the old message is still pending, and
    ValidationError as :func:`cancel` does.
    """
    due_ms = ids.deliver_at_ms_of(message_id)
    check_horizon(due_ms, now_ms=now_ms, limits=limits or Limits(), field="id")
    published.require_scripts("reschedule a message")
    shard = keys.keys_of(message_id, published.shards, published.group)
    new_id = ids.new_message_id(deliver_at_ms)
    while keys.keys_of(new_id, published.shards, published.group) != shard:
        new_id = ids.new_message_id(deliver_at_ms)
    record = Cancel(message_id, now_ms, rescheduled_to=new_id).to_record()
    read = status(message_id, now_ms=now_ms, published=published)

    def decide(replies: list[Any]) -> Plan[str]:
        current = read.parse(replies)
        assert isinstance(current, MessageStatus)
        if current.state != "pending":
            raise MessageStateError(message_id, current.state, "reschedule")
        args = script_args.reschedule_args(
            message_id,
            new_id,
            deliver_at_ms,
            retention_ms=retention_ms,
            horizon_ms=published.horizon_ms,
            record=record,
        )
        command = scripts.RESCHEDULE.command(scripts.RESCHEDULE.keys(shard), args)
        return Plan([command], done, "reschedule")

    def done(replies: list[Any]) -> str:
        outcome, value = script_args.reschedule_outcome(replies[-1])
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

    return Plan(read.commands, decide, "read a message's status")


#: Messages per near-path script call: a call's own cost in Redis is as large as a
#: message's, and 200 hold Redis for a few milliseconds at most.
NEAR_PER_CALL = 200

#: Record bytes per near-path call, past which a call ends early (it keeps at least one).
NEAR_BYTES_PER_CALL = 8 * 1024 * 1024


def schedule(messages: list[Message], published: Published = Published()) -> list[Command]:
    """The commands that schedule ``messages``: XADD to the inbound stream of their shard
    (:func:`keys.inbound_for`: one of ``published.shards``), or, for those due within
    the horizon of their ``sent_at_ms``, their shard's outbox script (which checks
    again, by Redis's clock), up to NEAR_PER_CALL of them a call.

    The Spark path takes a trigger plus a batch (seconds under load, tens of seconds
    while Spark restarts) to reach the outbox; a message due sooner would be late.

    Without a near message, none goes through the script: a plain XADD costs Redis
    less. With one, all do (the script appends the others to the same inbound
    stream), so that the commands are calls of one script only: a server that lost
    its scripts (restarted, flushed) answers NOSCRIPT to every one of them and runs
    none, and the retry with the script loaded runs them all (redis/connection.py).
    A plain XADD beside them would run alone.
    """
    if not published.scripts_ok or not any(
        is_near(message.deliver_at_ms, message.sent_at_ms, published.horizon_ms)
        for message in messages
    ):
        return [
            xadd(keys.inbound_for(message.id, published.shards), message.to_record())
            for message in messages
        ]
    commands: list[Command] = []
    lanes = keys.by_shard(messages, published.shards, lambda m: m.id, lambda m: group_of(m.topic))
    for shard, lane in lanes.items():
        records = [message.to_record() for message in lane]
        commands += [
            scripts.SEND_NEAR.command(
                scripts.SEND_NEAR.keys(shard), scripts.send_near_args(call, published.horizon_ms)
            )
            for call in near_calls(records)
        ]
    return commands


def near_calls(
    records: Sequence[Mapping[bytes, bytes]],
) -> Iterator[Sequence[Mapping[bytes, bytes]]]:
    """``records`` cut into the groups of one near-path call each, in order."""
    return chunks(
        records,
        max_items=NEAR_PER_CALL,
        max_bytes=NEAR_BYTES_PER_CALL,
        size_of=lambda record: sum(len(value) for value in record.values()),
    )
