"""The Lua files as Redis runs them, and what Python and Lua share: the constants
(``${NAME}``) and the marker strings.

A line ``--! include <file>`` pulls in a library shared by several scripts, and
``${NAME}`` is a constant that Python owns (:data:`LUA_CONSTANTS`); :func:`load`
expands both. A marker (:data:`MARKERS`) is a value that the scripts write into
Redis and Python reads back, or the reverse: both languages take it from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable

from delayline import forecast, history, limits
from delayline.errors import DelaylineError
from delayline.metrics import BUCKETS_MS, SUM_FIELD
from delayline.redis import keys
from delayline.schedules import ops

#: An entry due within this many ms of being put rings the pump's bell (see pump.py).
BELL_WITHIN_MS = 1_500


def _name(key: str) -> str:
    """A key's name within its shard's namespace."""
    return key.removeprefix(keys.NAMESPACE)


# The markers. Lua spells each as its ${NAME} (MARKERS), never as the literal.

#: The journal value of a message that a cancel dropped (read by status.py).
CANCELLED_MARK = b"cancelled"
#: The journal value of a message that a reschedule replaced precedes its new id.
RESCHEDULED_MARK = b"rescheduled:"
#: The inbound field that marks a send handed down from a coarse slot (not a new
#: message), written by topic_writes.lua and the drain, read by the scheduler's source.
CASCADE_FIELD = b"cascade"
#: Appended to a reschedule's cancel request ("<ms>:<new id>:<new due ms>") whose new
#: message must go through the inbound stream (redis/layout.py; topic_writes.lua's drop()).
VIA_INBOUND = b":i"
#: A cancel-requests field "<prefix><id>" holds the topic the request took out of
#: the forecast (lua/cancel_request.lua, lua/forecast.lua, redis/layout.py).
FORECAST_TAKEN = b"~"
#: A minute's forecast hash: a topic's field prefix, the field of cancels of unknown
#: topic (both owned by delayline/forecast.py), and its per-second hash's suffix
#: (redis/keys.py).
FORECAST_TOPIC = forecast.TOPIC_FIELD_PREFIX.encode()
FORECAST_UNKNOWN = forecast.UNKNOWN_TOPIC_FIELD.encode()
FORECAST_SECONDS = keys.FORECAST_SECONDS_SUFFIX.encode()

#: The start of the error a scheduler's shard script answers when its fencing token is
#: below the shard's fence (lua/fence.lua); redis/store.py raises FencedError for it.
FENCED_MARK = b"DELAYLINE_FENCED"

#: The ``op`` of a schedule's inbound record (owned by delayline/schedules/ops.py),
#: which weighs more against a batch's cap (lua/last_id_within.lua).
OP_SCHEDULE_MARK = ops.OP_SCHEDULE

#: Each marker by its ${NAME} in the Lua files.
MARKERS: Mapping[str, bytes] = {
    "CANCELLED": CANCELLED_MARK,
    "RESCHEDULED": RESCHEDULED_MARK,
    "CASCADE": CASCADE_FIELD,
    "VIA_INBOUND": VIA_INBOUND,
    "FORECAST_TAKEN": FORECAST_TAKEN,
    "FORECAST_TOPIC": FORECAST_TOPIC,
    "FORECAST_UNKNOWN": FORECAST_UNKNOWN,
    "FORECAST_SECONDS": FORECAST_SECONDS,
    "FENCED": FENCED_MARK,
    "OP_SCHEDULE": OP_SCHEDULE_MARK,
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
    "FORECAST": _name(keys.UNSHARDED.forecast(0)).removesuffix("0"),
    "FORECAST_INDEX": _name(keys.UNSHARDED.forecast_index),
    "FORECAST_TTL_S": keys.FORECAST_TTL_S,
    "HISTORY": _name(keys.UNSHARDED.history(0)).removesuffix("0"),
    "HISTORY_TTL_S": keys.HISTORY_TTL_S,
    "HISTORY_COUNTED": ", ".join(f"'{name}'" for name in history.COUNTED),
    "HISTORY_LATENESS": history.LATENESS_PREFIX,
    "READY": _name(keys.UNSHARDED.ready),
    "LANE_INFIX": keys.LANE_INFIX,
    "FENCE": _name(keys.UNSHARDED.fence),
    "TOPICS": _name(keys.UNSHARDED.topics),
    "REJECTS_MAX_LEN": keys.REJECTS_MAX_LEN,
    "TARGET": _name(keys.UNSHARDED.target),
    "LATENESS_BUCKETS_MS": ", ".join(str(bound) for bound in BUCKETS_MS),
    "SUM_FIELD": SUM_FIELD,
    "LIMITS": _name(keys.UNSHARDED.limits),
    "RATE_SLOTS": _name(keys.UNSHARDED.rate_slots("")),
    "RATE_SLOTS_TTL_S": keys.RATE_SLOTS_TTL_S,
    "SHARD_RATE_FIELD": limits.SHARD_RATE_FIELD,
    "SPREAD_FIELD": limits.SPREAD_FIELD,
    "GROUP_WIDE": limits.GROUP_WIDE,
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
