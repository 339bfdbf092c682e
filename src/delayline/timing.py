"""Time arithmetic: clocks, delay levels, and the timing wheel's slots.

Everything inside delayline is integer epoch milliseconds; aware datetimes
exist only at the edges (:func:`to_epoch_ms`, :func:`from_epoch_ms`).

The wheel: a message due at ``deliver_at_ms`` lives in the slot that starts at
``slot_start_ms(deliver_at_ms, tick_ms)``. A slot is split into ``shards`` so a
burst due at one instant spreads over several state keys and partitions; each
(slot, shard) pair is one state key, packed into one integer by
:func:`wheel_key`.

The wheel has two levels (:class:`Wheel`). A message due more than
``coarse_after_ms`` after it reaches the scheduler waits in a coarse slot of
``coarse_tick_ms``; ``cascade_ahead_ms`` before that slot starts, its messages
are handed down to the fine level (``tick_ms``), as a hierarchical timing
wheel does. Far-future messages thus share few keys however sparse they are.
(``cascade_ahead_ms`` is not the horizon, ``HORIZON_MS``: how early a fine slot
fires, and how soon a message must be due to skip the wheel.)
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from delayline.errors import ValidationError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# ASCII digits, at most 15 a number: more is no duration, and int() would refuse
# thousands of them with a ValueError rather than a ValidationError.
_DURATION = re.compile(r"([0-9]{1,15})(ms|s|m|h|d)")


def parse_duration_ms(text: str, field: str = "delay") -> int:
    """Parse a duration such as ``90s``, ``30m``, ``2h``, ``15d``, ``1h30m`` or ``250ms``.

    Raises ValidationError naming ``field`` for anything else (a bare number has no
    unit: refused).
    """
    compact = text.strip().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValidationError(
            field, "duration", f"not a duration: {text!r} (examples: 250ms, 90s, 30m, 2h, 15d)"
        )
    return sum(int(number) * _UNIT_MS[unit] for number, unit in parts)


def format_duration(duration_ms: int) -> str:
    """The shortest exact spelling of a duration (ms): 1500 -> "1500ms", 7200000 -> "2h"."""
    for unit in ("d", "h", "m", "s"):
        if duration_ms and duration_ms % _UNIT_MS[unit] == 0:
            return f"{duration_ms // _UNIT_MS[unit]}{unit}"
    return f"{duration_ms}ms"


#: RocketMQ's ``messageDelayLevel``, verbatim.
ROCKETMQ_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
#: The delay of each level in ms: level n is LEVELS_MS[n - 1].
LEVELS_MS: tuple[int, ...] = tuple(map(parse_duration_ms, ROCKETMQ_DELAY_LEVELS.split()))

#: Shards per slot may not exceed this (a key also encodes the level: see :func:`wheel_key`).
MAX_SHARDS = 128

#: The default horizon (ms). A message due within it of reaching delayline goes
#: straight into the outbox (the fine wheel), and the scheduler fires its slots
#: this far ahead. It must outlast the slowest batch and a restart of Spark
#: (tens of seconds on 2 cores), so that no message waits on Spark when it is due.
HORIZON_MS = 60_000


def is_near(deliver_at_ms: int, now_ms: int, horizon_ms: int) -> bool:
    """Whether a message due at ``deliver_at_ms`` is near at ``now_ms`` (all epoch
    ms; ``horizon_ms`` a duration): due within the horizon, so that it goes
    straight into the outbox. The one rule for "near or far"; the Lua scripts
    apply it by Redis's clock through ``redis/lua/horizon.lua``, which a test
    holds to this function.
    """
    return deliver_at_ms - now_ms <= horizon_ms


#: The pseudo-slot that carries rejected records through the scheduler.
REJECT_SLOT_MS = -1


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


#: 1970-01-01T00:00:00Z, where epoch ms count from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: 9999-12-31T23:59:59.999Z, the last instant a datetime can show (epoch ms).
LAST_MS = 253_402_300_799_999


def in_range_ms(epoch_ms: int, field: str) -> int:
    """``epoch_ms``, unless it is past LAST_MS (a time with a negative offset on the
    last day of 9999, say). Raises ValidationError naming ``field``."""
    if epoch_ms > LAST_MS:
        raise ValidationError(field, "range", f"{field} is after 9999-12-31T23:59:59.999Z")
    return epoch_ms


def to_epoch_ms(moment: datetime, field: str = "deliver_at") -> int:
    """Epoch ms of an aware datetime.

    Raises ValidationError, naming ``field``, for a naive datetime, whose meaning
    depends on the machine's timezone, and for one after LAST_MS.
    """
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        raise ValidationError(
            field,
            "timezone",
            f"{field} must be timezone-aware (for example datetime.now(UTC)); "
            "a naive datetime is ambiguous",
        )
    # In integers, as from_epoch_ms: a float of seconds is a millisecond off at times.
    return in_range_ms((moment - EPOCH) // timedelta(milliseconds=1), field)


def format_time(epoch_ms: int) -> str:
    """RFC 3339 in UTC with milliseconds: ``2026-12-01T09:00:00.000Z``."""
    return from_epoch_ms(epoch_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_epoch_ms(epoch_ms: int) -> datetime:
    """The aware UTC datetime of an epoch-ms timestamp."""
    # In integers: a float of seconds loses the millisecond after the year 2200 or so.
    return EPOCH + timedelta(milliseconds=epoch_ms)


def level_delay_ms(level: int) -> int:
    """The delay of RocketMQ level ``level`` (1..18), in ms.

    Raises ValidationError outside 1..18; RocketMQ clamps silently, we refuse.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(LEVELS_MS):
        raise ValidationError(
            "level",
            "range",
            f"level must be an integer from 1 to {len(LEVELS_MS)}, got {level!r}",
        )
    return LEVELS_MS[level - 1]


def slot_start_ms(deliver_at_ms: int, tick_ms: int) -> int:
    """Start (epoch ms) of the wheel slot holding a message due at ``deliver_at_ms``."""
    return deliver_at_ms - deliver_at_ms % tick_ms


@dataclass(frozen=True)
class Wheel:
    """The shape of the two-level wheel. Times are ms.

    ``cascade_ahead_ms`` is how long before a coarse slot starts it hands its
    messages down to fine slots; it is unrelated to the horizon (how early a
    fine slot fires). Raises ValueError unless ``coarse_tick_ms +
    cascade_ahead_ms < coarse_after_ms``, which guarantees that a handed-down
    message lands in a fine slot.
    """

    tick_ms: int = 500
    coarse_tick_ms: int = 60_000
    coarse_after_ms: int = 300_000
    cascade_ahead_ms: int = 120_000

    def __post_init__(self) -> None:
        if self.coarse_tick_ms + self.cascade_ahead_ms >= self.coarse_after_ms:
            raise ValueError("coarse_tick_ms + cascade_ahead_ms must be less than coarse_after_ms")

    def place(self, deliver_at_ms: int, received_ms: int) -> tuple[int, bool]:
        """The slot (start ms) and level (True: coarse) of a message received at ``received_ms``."""
        if deliver_at_ms - received_ms > self.coarse_after_ms:
            return slot_start_ms(deliver_at_ms, self.coarse_tick_ms), True
        return slot_start_ms(deliver_at_ms, self.tick_ms), False


def wheel_key(slot_ms: int, shard: int, coarse: bool = False) -> int:
    """Pack (slot start ms, level, shard) into the single integer Spark groups by."""
    return slot_ms * 2 * MAX_SHARDS + (MAX_SHARDS if coarse else 0) + shard


def split_wheel_key(key: int) -> tuple[int, int, bool]:
    """Inverse of :func:`wheel_key`: ``(slot_ms, shard, coarse)``."""
    slot_ms, rest = divmod(key, 2 * MAX_SHARDS)
    coarse, shard = divmod(rest, MAX_SHARDS)
    return slot_ms, shard, bool(coarse)


#: How long the scheduler's lease lasts without a renewal by default (ms; ``delayline
#: run --lease-ms``, see redis/lease.py): a standby takes over this long after the
#: active scheduler's last renewal, at most.
LEASE_TTL_MS = 1_500
#: How many times per ttl the holder renews the lease (every 300 ms by default), so
#: that four renewals in a row can fail (a slow Redis, a GC pause) before it lapses.
LEASE_RENEWALS = 5
#: How often a standby asks for the lease (ms).
STANDBY_POLL_MS = 100
