"""The delivery history: what each minute delivered, dropped and rejected, and how late
its deliveries were (pure).

The scripts that deliver count each call's outcome into its minute's hash, by
Redis's clock (``redis/lua/topic_writes.lua``), which expires a day and an hour
after the minute ends (``keys.HISTORY_TTL_S``): the server keeps the last day,
whatever reads it, in at most about 1,500 small hashes a shard. A reader adds
up every shard's. Times are epoch ms, minutes UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from delayline.errors import ValidationError
from delayline.metrics import SUM_FIELD, bucket_labels, percentile_ms
from delayline.timing import format_time

MINUTE_MS = 60_000
#: The counts a minute's hash holds, each under its own name.
COUNTED = ("delivered", "dropped", "rejected")
#: A minute's lateness histogram is held under these fields: this prefix and a
#: bucket's label (``metrics.bucket_labels``), or ``metrics.SUM_FIELD``.
LATENESS_PREFIX = "l:"
#: The longest history a read may ask for (minutes): the day the server keeps, and an hour.
MAX_MINUTES = 25 * 60
#: What a read asks for unless told: the last hour.
DEFAULT_MINUTES = 60


@dataclass(frozen=True)
class HistoryMinute:
    """What the minute starting at ``minute_ms`` delivered, dropped and rejected, and the
    lateness histogram of its deliveries (bucket label -> count, ms)."""

    minute_ms: int
    delivered: int = 0
    dropped: int = 0
    rejected: int = 0
    lateness: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_fields(cls, minute_ms: int, fields: Mapping[str, int]) -> HistoryMinute:
        """A minute from its hash's fields (every shard's added up)."""
        lateness = {
            name.removeprefix(LATENESS_PREFIX): count
            for name, count in fields.items()
            if name.startswith(LATENESS_PREFIX)
        }
        counts = {name: fields.get(name, 0) for name in COUNTED}
        return cls(minute_ms, lateness=lateness, **counts)

    def lateness_ms(self, fraction: float) -> float | None:
        """The ``fraction`` quantile of its deliveries' lateness (ms; a bucket's upper
        bound, ``inf`` past the last); None if it delivered nothing."""
        histogram = {label: self.lateness.get(label, 0) for label in bucket_labels()}
        return percentile_ms(histogram, fraction)

    def to_json(self) -> dict[str, object]:
        """Its JSON form (``GET /v1/history``)."""
        late_sum = self.lateness.get(SUM_FIELD, 0)
        return {
            "minute": format_time(self.minute_ms),
            "minute_ms": self.minute_ms,
            "delivered": self.delivered,
            "dropped": self.dropped,
            "rejected": self.rejected,
            "lateness_p50_ms": _finite(self.lateness_ms(0.5)),
            "lateness_p99_ms": _finite(self.lateness_ms(0.99)),
            "lateness_mean_ms": round(late_sum / self.delivered, 1) if self.delivered else None,
            "lateness_buckets": {label: self.lateness.get(label, 0) for label in bucket_labels()},
        }


@dataclass(frozen=True)
class History:
    """The minutes from ``from_ms`` to ``to_ms`` (epoch ms, whole minutes), each one,
    oldest first, the empty ones included."""

    from_ms: int
    to_ms: int
    minutes: list[HistoryMinute]

    @property
    def delivered(self) -> int:
        """Messages delivered over the whole window."""
        return sum(minute.delivered for minute in self.minutes)

    def to_json(self) -> dict[str, object]:
        """The JSON form of ``GET /v1/history`` and ``delayline history --json``."""
        return {
            "from": format_time(self.from_ms),
            "to": format_time(self.to_ms),
            "delivered": self.delivered,
            "minutes": [minute.to_json() for minute in self.minutes],
        }


def check_minutes(minutes: int) -> int:
    """``minutes``, a history's length. Raises ValidationError (field ``minutes``)
    outside 1..MAX_MINUTES."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
        raise ValidationError(
            "minutes", "range", f"minutes must be from 1 to {MAX_MINUTES}; got {minutes!r}"
        )
    return minutes


def window(minutes: int, now_ms: int) -> list[int]:
    """The ``minutes`` whole minutes up to and including the one holding ``now_ms``
    (their start, epoch ms), oldest first. Raises ValidationError (field ``minutes``)
    outside 1..MAX_MINUTES."""
    check_minutes(minutes)
    last_ms = now_ms // MINUTE_MS * MINUTE_MS
    return [last_ms - back * MINUTE_MS for back in range(minutes - 1, -1, -1)]


def build(minutes_ms: Sequence[int], fields: Sequence[Mapping[str, int]]) -> History:
    """The history of ``minutes_ms`` (whole minutes, oldest first) from their hashes'
    fields, in the same order."""
    found = [
        HistoryMinute.from_fields(at, counts) for at, counts in zip(minutes_ms, fields, strict=True)
    ]
    return History(minutes_ms[0], minutes_ms[-1] + MINUTE_MS, found)


def _finite(value: float | None) -> float | str | None:
    # JSON has no infinity: a quantile past the last bucket is the last bucket's label.
    return "+Inf" if value == float("inf") else value
