"""Message ids: unique, sortable by delivery time, and routable without a lookup.

An id is 26 Crockford base32 characters, laid out like a ULID: the first 10
encode ``deliver_at_ms`` (48 bits), the last 16 are 80 random bits. Because the
delivery time is in the id, a cancel (which carries only the id) finds its
message's time slot and shard by arithmetic alone, and ids sort by when they
are due.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import zlib

from delayline.errors import InvalidMessageIdError
from delayline.timing import LAST_MS

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUE = {char: index for index, char in enumerate(_ALPHABET)}
_TIME_CHARS = 10
_RANDOM_CHARS = 16
ID_LENGTH = _TIME_CHARS + _RANDOM_CHARS

#: The latest deliver_at_ms an id may carry: the last instant a datetime can show.
#: The 48 bits of its time could carry more (to the year 10889), but a time no one
#: can print is no use, and a caller's error.
MAX_ID_TIME_MS = LAST_MS

_ID_PATTERN = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_message_id(deliver_at_ms: int) -> str:
    """Return a fresh id that encodes ``deliver_at_ms`` (epoch ms, 0..MAX_ID_TIME_MS).

    Raises ValueError if ``deliver_at_ms`` does not fit in 48 bits.
    """
    if not 0 <= deliver_at_ms <= MAX_ID_TIME_MS:
        raise ValueError(f"deliver_at_ms out of range for an id: {deliver_at_ms}")
    return _encode(deliver_at_ms, _TIME_CHARS) + _encode(
        secrets.randbits(5 * _RANDOM_CHARS), _RANDOM_CHARS
    )


def derived_message_id(deliver_at_ms: int, seed: bytes) -> str:
    """The id of ``deliver_at_ms`` (as :func:`new_message_id` takes it) whose 80 bits
    after the time are a hash of ``seed``: the same seed and time give the same id
    in every process, so a replay or a second writer makes no second message (a
    schedule's runs, see :mod:`delayline.schedules.runs`). Raises ValueError as
    new_message_id does."""
    if not 0 <= deliver_at_ms <= MAX_ID_TIME_MS:
        raise ValueError(f"deliver_at_ms out of range for an id: {deliver_at_ms}")
    digest = hashlib.blake2b(seed, digest_size=_RANDOM_CHARS * 5 // 8).digest()
    return _encode(deliver_at_ms, _TIME_CHARS) + _encode(
        int.from_bytes(digest, "big"), _RANDOM_CHARS
    )


def is_message_id(value: object) -> bool:
    """True if ``value`` is a well-formed message id, due by MAX_ID_TIME_MS."""
    return (
        isinstance(value, str)
        and _ID_PATTERN.fullmatch(value) is not None
        and _time_of(value) <= MAX_ID_TIME_MS
    )


def deliver_at_ms_of(message_id: str) -> int:
    """The delivery time (epoch ms) encoded in ``message_id``.

    Raises InvalidMessageIdError if the id is malformed.
    """
    if not is_message_id(message_id):
        raise InvalidMessageIdError(message_id)
    return _time_of(message_id)


def _time_of(message_id: str) -> int:
    value = 0
    for char in message_id[:_TIME_CHARS]:
        value = value * 32 + _VALUE[char]
    return value


def shard_of(message_id: str, shards: int) -> int:
    """The shard (0..shards-1) of a message: within its time slot, and among the
    inbound streams.

    A stable hash (CRC-32), so every process and every restart agrees.
    """
    return zlib.crc32(message_id.encode("ascii")) % shards
