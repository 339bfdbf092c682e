"""Lua scripts that make the scheduler's Redis writes atomic.

Each runs in one shard (:class:`keys.ShardKeys`), whose namespace it takes as its
last key, and touches that shard's keys only, and topic streams: one chunk of
deliveries writes several topic streams and the sink marker in one atomic step,
so it needs a single Redis server (or, on Redis Cluster, topics in the shard's
slot; see docs/scaling.md). "Due" is
judged by Redis's clock (``TIME``), the clock that stamps stream entry ids, so
no consumer can see an entry whose id is older than its ``deliver_at_ms``.

Each script is a file in ``lua/``, with what it takes and returns at its top. A
line ``--! include <file>`` pulls in a library shared by several scripts, and
``${NAME}`` is a constant that Python owns (:data:`LUA_CONSTANTS`); :func:`load`
expands both when this module is imported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable

from delayline import ids
from delayline.errors import DelaylineError
from delayline.metrics import BUCKETS_MS, SUM_FIELD
from delayline.redis import keys

#: An entry due within this many ms of being put rings the pump's bell (see pump.py).
BELL_WITHIN_MS = 1_500


def _name(key: str) -> str:
    """A key's name within its shard's namespace."""
    return key.removeprefix(keys.NAMESPACE)


#: What each ``${NAME}`` in the Lua files stands for.
LUA_CONSTANTS: Mapping[str, str | int] = {
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


#: The count-th inbound entry's id after a given one (lua/last_id_within.lua).
LAST_ID_WITHIN = load("last_id_within.lua")
#: Add a batch's ingest counts once (lua/count_ingest.lua).
COUNT_INGEST = load("count_ingest.lua")
#: Record cancel requests, and take them out of the forecast (lua/cancel.lua).
CANCEL = load("cancel.lua")
#: The name the SDK calls CANCEL by (EVALSHA).
CANCEL_SHA = hashlib.sha1(CANCEL.encode()).hexdigest()
#: Reschedule a message (lua/reschedule.lua).
RESCHEDULE = load("reschedule.lua")
#: The name the SDK calls RESCHEDULE by (EVALSHA).
RESCHEDULE_SHA = hashlib.sha1(RESCHEDULE.encode()).hexdigest()
#: Read the outbox for a listing (lua/list_outbox.lua).
LIST_OUTBOX = load("list_outbox.lua")
#: The SDK's near path: sends due soon, into the outbox (lua/send_near.lua).
SEND_NEAR = load("send_near.lua")
#: The name the near path calls SEND_NEAR by (EVALSHA).
SEND_NEAR_SHA = hashlib.sha1(SEND_NEAR.encode()).hexdigest()
#: Write one chunk of a sink partition and advance its marker (lua/write_chunk.lua).
WRITE_CHUNK = load("write_chunk.lua")
#: Move due messages from the outbox to their topics (lua/pump.lua).
PUMP = load("pump.lua")
#: Trim a topic stream's head by its retention (lua/trim_topic.lua).
TRIM_TOPIC = load("trim_topic.lua")
#: Write a shard's ready entries to one topic (lua/deliver_ready.lua).
DELIVER_READY = load("deliver_ready.lua")
#: Count and take off a shard's ready entries once written (lua/settle_ready.lua).
SETTLE_READY = load("settle_ready.lua")


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
