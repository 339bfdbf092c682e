"""Lua scripts that make the scheduler's Redis writes atomic, each declared once.

Each runs in one shard (:class:`keys.ShardKeys`), whose namespace it takes as its
last key, and touches that shard's keys only, and topic streams: one chunk of
deliveries writes several topic streams and the sink marker in one atomic step,
so it needs a single Redis server (or, on Redis Cluster, topics in the shard's
slot; see docs/scaling.md). "Due" is judged by Redis's clock (``TIME``), the
clock that stamps stream entry ids, so no consumer can see an entry whose id is
older than its ``deliver_at_ms``.

Each script is a file in ``lua/``, with what it takes and returns at its top,
as :mod:`~delayline.redis.lua_source` expands it (its libraries, and the
constants and marker strings that Python owns).

Every entry script is a :class:`Script` below: its file, what each ``KEYS[n]``
is, and next to it the builder of its ARGV and the parser of its reply where
they take more than a list. Nothing else writes a KEYS order: callers ask the
declaration.

One way to call a script: ``EVALSHA`` (:meth:`Script.command`), and when Redis
answers ``NOSCRIPT`` (a new, restarted or flushed server), ``SCRIPT LOAD`` and
the same call once more, in redis/connection.py (``run_commands`` for the
plans of both clients, ``RedisConnection._script`` for the scheduler's sides).
Why not the alternatives: sending ``SCRIPT LOAD`` (or ``EVAL``) with every call
puts the text on the wire each time (the near path's script is 4 KB, the
sink's 11 KB); redis-py's ``register_script`` asks ``SCRIPT EXISTS`` in a round
trip of its own before every pipeline, and cannot serve the sans-IO plans. In
a MULTI/EXEC Redis runs the other commands even when one answers ``NOSCRIPT``,
so only the calls that failed run again (in a transaction of their own): each
write still happens once. A send stays all or none: its transaction holds
calls of SEND_NEAR alone whenever it holds one (plans/producing.py). A cancel's
record on the inbound stream may precede its request by that round trip; the
source records it from the stream either way.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from delayline import ids
from delayline.errors import DelaylineError
from delayline.redis import keys
from delayline.redis.commands import Command
from delayline.redis.keys import ShardKeys
from delayline.redis.lua_source import load
from delayline.retention import TopicRetention
from delayline.rows import (
    Cascade,
    CountedRun,
    Deliver,
    Drop,
    ForecastChange,
    OutgoingMessage,
    ReadyEntry,
    Revoke,
    Run,
    SinkRow,
)


@dataclass(frozen=True)
class Script:
    """An entry script: its file in ``lua/``, and what each of its ``KEYS[n]`` is.

    A key name is a :class:`keys.ShardKeys` attribute (the shard's key of that
    name), or a key that the caller gives by that name (a sink marker, a topic).
    Those in ``topic_keys`` are in their topic's Redis Cluster slot; all others
    in the shard's.
    """

    file: str
    key_names: tuple[str, ...]
    topic_keys: frozenset[str] = frozenset()
    #: The script as Redis runs it (:func:`load`).
    text: str = field(init=False, repr=False, compare=False)
    #: The name Redis knows it by (SHA-1 of ``text``), for EVALSHA.
    sha: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = load(self.file)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "sha", hashlib.sha1(text.encode()).hexdigest())
        _BY_SHA[self.sha] = self

    def keys(self, shard: ShardKeys | None = None, **given: str) -> tuple[str, ...]:
        """The script's KEYS in order: each ``given`` by its name, else ``shard``'s key
        of that name. Raises DelaylineError for a key neither gives, or a given name
        that the script does not declare."""
        unknown = set(given) - set(self.key_names)
        if unknown:
            raise DelaylineError(f"Lua script {self.file} has no key {sorted(unknown)}")
        found: list[str] = []
        for name in self.key_names:
            value = given[name] if name in given else getattr(shard, name, None)
            if not isinstance(value, str):
                raise DelaylineError(f"Lua script {self.file}: no key {name} given")
            found.append(value)
        return tuple(found)

    def command(self, script_keys: Sequence[str], args: Iterable[object] = ()) -> Command:
        """The call of this script with ``script_keys`` (:meth:`keys`) and ``args``."""
        if len(script_keys) != len(self.key_names):
            raise DelaylineError(
                f"Lua script {self.file} takes {len(self.key_names)} keys, not {len(script_keys)}"
            )
        return ("EVALSHA", self.sha, len(script_keys), *script_keys, *args)

    def load_command(self) -> Command:
        """The command that makes Redis know this script by its :attr:`sha`."""
        return ("SCRIPT", "LOAD", self.text)


_BY_SHA: dict[str, Script] = {}


def by_sha(sha: str | bytes) -> Script | None:
    """The declared script that Redis knows by ``sha``, or None."""
    return _BY_SHA.get(sha.decode() if isinstance(sha, bytes) else sha)


# The libraries name the shard's other keys (status hashes in lua/status_keys.lua, the
# forecast in lua/forecast.lua) from ``ns``, the namespace: each shard script takes it
# as its last key and sets ``ns`` before its includes. So they share the shard's slot.

#: The inbound entry's id after a given one where a batch of a given weight ends, a
#: page of entries a call (lua/last_id_within.lua). ARGV: after id, budget, page, a
#: schedule record's weight. Replies [entry id or nil, 1 if the look ends there, 0
#: if it goes on from that id, the weight taken].
LAST_ID_WITHIN = Script("last_id_within.lua", ("inbound",))
#: Add a batch's ingest counts once (lua/count_ingest.lua); ARGV: :func:`ingest_args`.
COUNT_INGEST = Script("count_ingest.lua", ("ingest_marker", "stats", "namespace"))


def ingest_args(
    batch_id: int, accepted: Mapping[tuple[int, str], int], cancels: int
) -> list[str | int]:
    """COUNT_INGEST's arguments: the batch, its sends counted per (due second given as
    an epoch ms within it, topic), and its cancels."""
    args: list[str | int] = [batch_id, sum(accepted.values()), cancels, keys.MARKER_TTL_S]
    for (second_ms, topic), count in accepted.items():
        args += [second_ms, topic, count]
    return args


#: Record cancel requests, and take them out of the forecast (lua/cancel.lua);
#: ARGV: :func:`cancel_args`. Replies how many were taken out of the forecast.
CANCEL = Script("cancel.lua", ("namespace",))


def cancel_args(
    now_ms: int, retention_ms: int, cancels: Iterable[tuple[str, int, str]], topic: str = ""
) -> list[str | int]:
    """CANCEL's arguments for cancels given as (id, deliver_at_ms, new id or "" unless a
    reschedule's), all of ``topic`` ("" when unknown)."""
    args: list[str | int] = [now_ms, retention_ms]
    for message_id, deliver_at_ms, new_id in cancels:
        new = f"{new_id}:{ids.deliver_at_ms_of(new_id)}" if new_id else ""
        args += [message_id, deliver_at_ms, topic, new]
    return args


#: Reschedule a message (lua/reschedule.lua); ARGV: :func:`script_args.reschedule_args`;
#: reply: :func:`script_args.reschedule_outcome`.
RESCHEDULE = Script(
    "reschedule.lua",
    ("outbox", "outbox_data", "outbox_bell", "inbound", "stats", "lateness", "rejects",
     "namespace"),
)  # fmt: skip


#: Read the outbox for a listing (lua/list_outbox.lua); ARGV: see the file; reply:
#: :func:`script_args.outbox_page`.
LIST_OUTBOX = Script("list_outbox.lua", ("outbox", "outbox_data"))


#: The SDK's near path: sends due soon, into the outbox (lua/send_near.lua);
#: ARGV: :func:`send_near_args`. Replies how many went to the outbox.
SEND_NEAR = Script(
    "send_near.lua", ("outbox", "outbox_data", "outbox_bell", "inbound", "stats", "namespace")
)


def send_near_args(records: Iterable[Mapping[bytes, bytes]], horizon_ms: int) -> list[object]:
    """SEND_NEAR's arguments: each message as its inbound record (one encoding, sent once)."""
    args: list[object] = [horizon_ms]
    for record in records:
        args.append(len(record))
        args += [part for pair in record.items() for part in pair]
    return args


#: Write one chunk of a sink partition and advance its marker (lua/write_chunk.lua);
#: ARGV: :func:`chunk_args`; reply: :func:`chunk_result`.
WRITE_CHUNK = Script(
    "write_chunk.lua",
    ("marker", "stats", "lateness", "rejects", "outbox", "outbox_data", "inbound",
     "outbox_bell", "namespace"),
)  # fmt: skip

#: The letter of each message row in a chunk (see lua/write_chunk.lua).
ROW_KINDS: dict[type[OutgoingMessage], str] = {
    Deliver: "d",
    Drop: "x",
    Cascade: "c",
    Run: "n",
    CountedRun: "m",
}


def chunk_args(
    batch_id: int,
    first_row: int,
    rows: Sequence[SinkRow],
    *,
    journal_ttl_s: int,
    horizon_ms: int,
    shard: ShardKeys,
    fence_token: int = 0,
) -> list[Any]:
    """WRITE_CHUNK's arguments: rows ``[first_row, first_row + len(rows))`` of a batch's
    partition in ``shard``, each message row with the names of its status hashes, by a
    scheduler holding the lease with ``fence_token`` (0: none; see redis/lease.py)."""
    args: list[Any] = [
        batch_id, first_row, len(rows), keys.MARKER_TTL_S, journal_ttl_s, horizon_ms,
        fence_token,
    ]  # fmt: skip
    for row in rows:
        if isinstance(row, OutgoingMessage):
            args += [
                ROW_KINDS[type(row)], row.topic, row.id, row.body, row.key, row.headers,
                row.deliver_at_ms, row.attempt, shard.journal(row.deliver_at_ms),
                shard.cancel_requests(row.deliver_at_ms),
            ]  # fmt: skip
            continue
        if isinstance(row, Revoke):
            args += ["k", row.id, row.deliver_at_ms, row.topic]
            continue
        if isinstance(row, ForecastChange):
            args += ["f", row.topic, row.minute_ms, row.delta]
            continue
        if row.message_id is None:
            args += ["r", "", "", row.reason]
        else:
            status_key = shard.rejected(ids.deliver_at_ms_of(row.message_id))
            args += ["r", status_key, row.message_id, row.reason]
        args.append(len(row.fields))
        for name, value in row.fields:
            args += [name, value]
    return args


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What one sink chunk wrote; ``written`` is the marker after it (resume there)."""

    written: int
    delivered: int
    duplicates: int
    dropped: int
    rejected: int


def chunk_result(reply: Sequence[int]) -> ChunkResult:
    """WRITE_CHUNK's reply."""
    return ChunkResult(*(int(count) for count in reply))


#: Move due messages from the outbox to their topics (lua/pump.lua).
#: ARGV: max messages, journal ttl s, horizon ms, fencing token; reply: :func:`pump_result`.
PUMP = Script(
    "pump.lua",
    ("outbox", "outbox_data", "stats", "lateness", "rejects", "outbox_bell", "inbound",
     "namespace"),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PumpResult:
    """Pump calls made in one round trip: how many messages they moved, and what the
    last one saw: Redis's time, the next due time (or None), how many entries wait in
    the shard's ready stream (see ``DeliveryStore.flush_ready``), how long until the
    next due time by Redis's clock to the µs (ms; 0 or less: due now), and how many
    messages are due by then."""

    moved: int
    now_ms: int
    next_due_ms: int | None
    ready: int = 0
    due_in_ms: float | None = None
    due_by_next: int = 0


def pump_result(replies: Sequence[Sequence[Any]]) -> PumpResult:
    """The replies of PUMP calls made one after the other, as one result."""
    _, now_ms, next_due, ready, now_us_past, due_by_next = replies[-1]
    moved = sum(int(reply[0]) for reply in replies)
    # A held message's score has a fraction (lua/pump.lua): it is due at the next ms.
    next_due_ms = math.ceil(float(next_due))
    if next_due_ms < 0:
        return PumpResult(moved, int(now_ms), None, int(ready))
    due_in_ms = next_due_ms - int(now_ms) - int(now_us_past) / 1000
    return PumpResult(moved, int(now_ms), next_due_ms, int(ready), due_in_ms, int(due_by_next))


#: Trim a topic stream's head (lua/trim_topic.lua); ARGV: :func:`trim_args`, reply: :func:`trimmed`.
TRIM_TOPIC = Script("trim_topic.lua", ("topic",), topic_keys=frozenset({"topic"}))

#: Most entries one call of TRIM_TOPIC removes: whole stream nodes, a few
#: microseconds each, so that even a long trim never holds Redis up.
TRIM_BATCH = 10_000


def trim_args(retention: TopicRetention, needed: str | None) -> list[str | int]:
    """TRIM_TOPIC's arguments: trim by ``retention``, at most TRIM_BATCH, and from id
    ``needed`` (a consumer group's oldest; None: none) on only by the hard cap."""
    return [
        retention.max_age_ms,
        retention.max_len,
        retention.hard_max_len,
        needed or "",
        TRIM_BATCH,
    ]


@dataclass(frozen=True)
class Trimmed:
    """What one trim call did to a stream."""

    removed: int
    #: Of them, entries a consumer group still needed (a hard cap took them).
    unread: int
    #: Whether the call stopped at TRIM_BATCH: more may go.
    more: bool


def trimmed(reply: Sequence[Any]) -> Trimmed:
    """TRIM_TOPIC's reply."""
    removed, unread, more = reply
    return Trimmed(int(removed), int(unread), bool(more))


#: Write a shard's ready entries to one topic (lua/deliver_ready.lua), in the topic's
#: slot: ``written`` is :func:`keys.topic_written` of the topic. ARGV:
#: :func:`deliver_ready_args`; reply: :func:`deliver_ready_failed`.
DELIVER_READY = Script(
    "deliver_ready.lua", ("topic", "written"), topic_keys=frozenset({"topic", "written"})
)


def deliver_ready_args(journal_ttl_s: int, entries: Iterable[ReadyEntry]) -> list[Any]:
    """DELIVER_READY's arguments: ready ``entries`` of one topic, each whole."""
    args: list[Any] = [journal_ttl_s]
    for entry_id, fields in entries:
        args += [entry_id, len(fields), *(part for pair in fields.items() for part in pair)]
    return args


def deliver_ready_failed(reply: Sequence[bytes]) -> dict[bytes, bytes]:
    """DELIVER_READY's reply: the error of each ready entry (by id) its topic refused."""
    return dict(zip(reply[0::2], reply[1::2], strict=True))


#: Count and take off a shard's ready entries once written (lua/settle_ready.lua);
#: ARGV: :func:`settle_args`.
SETTLE_READY = Script("settle_ready.lua", ("ready", "stats", "lateness", "rejects", "namespace"))

#: A ready entry's fate: its id and fields, and '' (written to its topic) or why its
#: topic refused it for good (it becomes a reject).
Settled = tuple[ReadyEntry, str]


def settle_args(journal_ttl_s: int, settled: Iterable[Settled], fence_token: int = 0) -> list[Any]:
    """SETTLE_READY's arguments: the fencing token (0: none; see redis/lease.py), then
    each entry's id, error ('' if written), and times."""
    args: list[Any] = [journal_ttl_s, fence_token]
    for (entry_id, fields), error in settled:
        args += [entry_id, error, fields[b"deliver_at_ms"], fields[b"delivered_at_ms"]]
    return args


#: Take, renew or give up the scheduler's lease (lua/lease.lua; redis/lease.py).
#: ARGV: owner, ttl ms (0: give it up), the owner's token (0: none yet); replies its token, or 0.
LEASE = Script("lease.lua", ("lease", "token"))
#: Raise a shard's fence to a token (lua/raise_fence.lua); ARGV: token; replies the fence.
RAISE_FENCE = Script("raise_fence.lua", ("fence",))

#: Create a group (lua/create_group.lua); ARGV: name, stored group, token digest, most
#: groups; replies 1 (created), 0 (name taken) or -1 (registry full).
CREATE_GROUP = Script("create_group.lua", ("groups", "tokens"))

#: Take sends of a group's rate quota (lua/take_sends.lua); ARGV: n, most a second,
#: ttl s; replies {1 (taken) or 0 (refused), the count after}.
TAKE_SENDS = Script("take_sends.lua", ("counter",))

#: Every entry script.
ALL: tuple[Script, ...] = tuple(_BY_SHA.values())
