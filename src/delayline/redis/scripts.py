"""Lua scripts that make the scheduler's Redis writes atomic, each declared once.

Each runs in one shard (:class:`keys.ShardKeys`), whose namespace it takes as its
last key, and touches that shard's keys only, and topic streams: one chunk of
deliveries writes several topic streams and the sink marker in one atomic step,
so it needs a single Redis server (or, on Redis Cluster, topics in the shard's
slot; see docs/scaling.md). "Due" is judged by Redis's clock (``TIME``), the
clock that stamps stream entry ids, so no consumer can see an entry whose id is
older than its ``deliver_at_ms``.

Each script is a file in ``lua/``, with what it takes and returns at its top. A
line ``--! include <file>`` pulls in a library shared by several scripts, and
``${NAME}`` is a constant that Python owns (:data:`LUA_CONSTANTS`, which holds
every marker string both languages read); :func:`load` expands both.

Every entry script is a :class:`Script` below: its file, what each ``KEYS[n]``
is, and next to it the builder of its ARGV where that takes more than a list.
Nothing else writes a KEYS order: callers ask the declaration.

One way to call a script: ``EVALSHA`` (:meth:`Script.command`), and when Redis
answers ``NOSCRIPT`` (a new, restarted or flushed server), ``SCRIPT LOAD`` and
the same call once more (``connection.run_commands``, under both clients and
every server side). The text then crosses the network once per server, not
with every call: the near path's script is 4 KB, the sink's 11 KB. In a
MULTI/EXEC Redis runs the other commands even when one answers ``NOSCRIPT``,
so only the calls that failed run again (in a transaction of their own): each
write still happens once; what a reader can see for one round trip is the
transaction's other commands without those calls.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable

from delayline import ids
from delayline.errors import DelaylineError
from delayline.metrics import BUCKETS_MS, SUM_FIELD
from delayline.redis import keys
from delayline.redis.commands import Command
from delayline.redis.keys import ShardKeys

#: An entry due within this many ms of being put rings the pump's bell (see pump.py).
BELL_WITHIN_MS = 1_500


def _name(key: str) -> str:
    """A key's name within its shard's namespace."""
    return key.removeprefix(keys.NAMESPACE)


# Markers: values that the scripts write into Redis and Python reads back, or the
# reverse. Lua spells each as its ${NAME} (MARKERS), never as the literal.

#: The journal value of a message that a cancel dropped (read by status.py).
CANCELLED_MARK = b"cancelled"
#: The journal value of a message that a reschedule replaced precedes its new id.
RESCHEDULED_MARK = b"rescheduled:"
#: The inbound field that marks a send handed down from a coarse slot (not a new
#: message), written by delivery.lua and the drain, read by the scheduler's source.
CASCADE_FIELD = b"cascade"
#: Appended to a reschedule's cancel request ("<ms>:<new id>:<new due ms>") whose new
#: message must go through the inbound stream (redis/layout.py; delivery.lua's drop()).
VIA_INBOUND = b":i"
#: A cancel-requests field "<prefix><id>" holds the topic the request took out of
#: the forecast (lua/cancel_request.lua, lua/pending.lua, redis/layout.py).
FORECAST_TAKEN = b"~"

#: Each marker by its ${NAME} in the Lua files.
MARKERS: Mapping[str, bytes] = {
    "CANCELLED": CANCELLED_MARK,
    "RESCHEDULED": RESCHEDULED_MARK,
    "CASCADE": CASCADE_FIELD,
    "VIA_INBOUND": VIA_INBOUND,
    "FORECAST_TAKEN": FORECAST_TAKEN,
}

#: What each ``${NAME}`` in the Lua files stands for.
LUA_CONSTANTS: Mapping[str, str | int] = {
    **{name: value.decode() for name, value in MARKERS.items()},
    "BELL_WITHIN_MS": BELL_WITHIN_MS,
    "JOURNAL_BUCKET_MS": keys.JOURNAL_BUCKET_MS,
    "CANCELS_BUCKET_MS": keys.CANCELS_BUCKET_MS,
    # A status hash's name is the shard's namespace (the script's last key), a name
    # and the due minute (keys.ShardKeys.journal and friends).
    "JOURNAL": _name(keys.UNSHARDED.journal(0)).removesuffix("0"),
    "CANCELS": _name(keys.UNSHARDED.cancel_requests(0)).removesuffix("0"),
    "REJECTED": _name(keys.UNSHARDED.rejected(0)).removesuffix("0"),
    "PENDING": _name(keys.UNSHARDED.forecast(0)).removesuffix("0"),
    "PENDING_INDEX": _name(keys.UNSHARDED.forecast_index),
    "PENDING_TTL_S": keys.FORECAST_TTL_S,
    "NAMESPACE": keys.NAMESPACE,
    "READY": _name(keys.UNSHARDED.ready),
    "TOPICS": _name(keys.UNSHARDED.topics),
    "REJECTS_MAX_LEN": keys.REJECTS_MAX_LEN,
    "TARGET": _name(keys.UNSHARDED.target),
    "LATENESS_BUCKETS_MS": ", ".join(str(bound) for bound in BUCKETS_MS),
    "SUM_FIELD": SUM_FIELD,
}

#: The scripts and their libraries.
LUA_DIR = resources.files("delayline.redis") / "lua"

_INCLUDE = "--! include "
_CONSTANT = re.compile(r"\$\{([^}\n]*)\}")


def load(
    name: str, directory: Traversable = LUA_DIR, constants: Mapping[str, object] = LUA_CONSTANTS
) -> str:
    """The script in file ``name`` of ``directory``, as Redis runs it.

    Each ``--! include <file>`` line becomes that file's script, expanded alike,
    unless the script holds it already; each ``${NAME}`` becomes
    ``constants[NAME]``. Blank lines and whole-line comments are left out: they
    are for the reader of the file, and the near path sends its script with
    every call.
    Raises DelaylineError if a file is missing or a ``${...}`` names no constant.
    """

    def value(match: re.Match[str]) -> str:
        if match[1] not in constants:
            raise DelaylineError(f"Lua script {name}: no constant {match[0]}")
        return str(constants[match[1]])

    text = _CONSTANT.sub(value, "\n".join(_expanded(name, directory, set())) + "\n")
    if "${" in text:
        raise DelaylineError(f"Lua script {name}: a ${{ without its }}")
    return text


def _expanded(name: str, directory: Traversable, included: set[str]) -> list[str]:
    """The code lines of file ``name`` with its includes expanded; adds to ``included``
    the files it takes in, and takes none that is there already."""
    path = directory / name
    if not path.is_file():
        raise DelaylineError(f"no Lua file {name} in {directory}")
    included.add(name)
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(_INCLUDE):
            library = line.removeprefix(_INCLUDE).strip()
            if library not in included:
                lines += _expanded(library, directory, included)
        elif line.strip() and not line.lstrip().startswith("--"):
            lines.append(line)
    return lines


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


#: Every key a shard script builds from its namespace (its last key) lies in the
#: shard's slot too: status hashes (lua/status_keys.lua), forecast (lua/pending.lua).

#: The count-th inbound entry's id after a given one (lua/last_id_within.lua).
#: ARGV: after id, count. Replies an entry id, or nil.
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


#: Reschedule a message (lua/reschedule.lua); ARGV: :func:`reschedule_args`.
#: Replies (outcome, value): see the file.
RESCHEDULE = Script(
    "reschedule.lua",
    ("outbox", "outbox_data", "outbox_bell", "inbound", "stats", "lateness", "rejects",
     "namespace"),
)  # fmt: skip


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


#: Read the outbox for a listing (lua/list_outbox.lua); ARGV and reply: see the file.
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
#: its rows are built by redis/store.py.
WRITE_CHUNK = Script(
    "write_chunk.lua",
    ("marker", "stats", "lateness", "rejects", "outbox", "outbox_data", "inbound",
     "outbox_bell", "namespace"),
)  # fmt: skip
#: Move due messages from the outbox to their topics (lua/pump.lua).
#: ARGV: max messages, journal ttl s, horizon ms.
PUMP = Script(
    "pump.lua",
    ("outbox", "outbox_data", "stats", "lateness", "rejects", "outbox_bell", "inbound",
     "namespace"),
)  # fmt: skip
#: Trim a topic stream's head by its retention (lua/trim_topic.lua).
TRIM_TOPIC = Script("trim_topic.lua", ("topic",), topic_keys=frozenset({"topic"}))
#: Write a shard's ready entries to one topic (lua/deliver_ready.lua), in the topic's
#: slot: ``written`` is :func:`keys.topic_written` of the topic.
DELIVER_READY = Script(
    "deliver_ready.lua", ("topic", "written"), topic_keys=frozenset({"topic", "written"})
)
#: Count and take off a shard's ready entries once written (lua/settle_ready.lua).
SETTLE_READY = Script("settle_ready.lua", ("ready", "stats", "lateness", "rejects", "namespace"))

#: Every entry script.
ALL: tuple[Script, ...] = tuple(_BY_SHA.values())
