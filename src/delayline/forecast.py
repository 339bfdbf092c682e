"""The forecast: how many messages are pending, per time bucket and topic, and when
the hot instants (seconds with many messages due) are.

It is built from counters kept per due minute, exactly, by the scripts that
accept and settle messages (see ``redis/lua/forecast.lua``): no message is read,
so it costs the same at 10k or 10M pending. A cancel leaves the counts when it
is requested; its message leaves its topic's count then too if the cancel named
the topic (cancels by key do), and otherwise when its slot fires.

Pure: no Redis, no clock of its own. Times are epoch ms, buckets are UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from delayline.errors import ValidationError
from delayline.timing import format_time

Granularity = Literal["minute", "hour", "day"]
GRANULARITIES: tuple[Granularity, ...] = get_args(Granularity)

#: The length of each granularity's bucket (ms).
BUCKET_MS: Mapping[Granularity, int] = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
MINUTE_MS = 60_000

#: A second with more messages due than this is a hot instant, unless asked otherwise.
DEFAULT_HOT_OVER = 1_000


#: A minute's forecast hash: the field of a topic's count is this prefix and the topic,
#: and the count of cancels whose topic is unknown is UNKNOWN_TOPIC_FIELD. The Lua that
#: writes them takes both from here (redis/lua_source.py).
TOPIC_FIELD_PREFIX = "t:"
UNKNOWN_TOPIC_FIELD = "u"


@dataclass(frozen=True)
class MinuteCounts:
    """One due minute's counters: pending per topic, and cancels of unknown topic."""

    topics: dict[str, int]
    cancelled_unknown_topic: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> MinuteCounts:
        """Parse the minute's hash: ``t:<topic>`` -> n, ``u`` -> n."""
        topics = {
            name.removeprefix(TOPIC_FIELD_PREFIX): int(value)
            for name, value in fields.items()
            if name.startswith(TOPIC_FIELD_PREFIX)
        }
        return cls(topics, int(fields.get(UNKNOWN_TOPIC_FIELD, 0)))

    def count(self, topic: str | None) -> int:
        """Messages pending in this minute, of ``topic`` or of all topics (never below 0).

        A cancel of a message never sent takes one away that nothing adds back:
        counts are clamped rather than shown negative.
        """
        if topic is not None:
            return max(self.topics.get(topic, 0), 0)
        return max(sum(self.topics.values()) - self.cancelled_unknown_topic, 0)


@dataclass(frozen=True)
class Bucket:
    """Messages due in ``[start_ms, start_ms + the bucket's length)``."""

    start_ms: int
    count: int
    topics: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class HotInstant:
    """A second, starting at ``at_ms``, with ``count`` messages due."""

    at_ms: int
    count: int


@dataclass(frozen=True)
class Forecast:
    """Pending messages by bucket (the non-empty ones, in time order) and hot instants."""

    by: Granularity
    buckets: list[Bucket]
    hot: list[HotInstant]
    hot_over: int
    topic: str | None = None

    @property
    def total(self) -> int:
        """Messages pending in the window."""
        return sum(bucket.count for bucket in self.buckets)

    def to_json(self) -> dict[str, object]:
        """The JSON form of ``GET /v1/pending`` and ``delayline pending --json``."""
        return {
            "by": self.by,
            "topic": self.topic,
            "total": self.total,
            "buckets": [
                {"start": format_time(b.start_ms), "count": b.count, "topics": b.topics}
                for b in self.buckets
            ],
            "hot_over": self.hot_over,
            "hot": [{"at": format_time(h.at_ms), "count": h.count} for h in self.hot],
        }


def check_granularity(by: str) -> Granularity:
    """``by`` as a granularity. Raises ValidationError unless minute, hour or day."""
    for granularity in GRANULARITIES:
        if by == granularity:
            return granularity
    raise ValidationError(
        "by", "choice", f"by must be one of {', '.join(GRANULARITIES)}, not {by!r}"
    )


def minute_window(from_ms: int | None, to_ms: int | None) -> tuple[int | None, int | None]:
    """The due minutes (since the epoch) that ``[from_ms, to_ms)`` touches; None is open.

    Raises ValidationError if the window ends before it starts.
    """
    if from_ms is not None and to_ms is not None and to_ms <= from_ms:
        raise ValidationError(
            "to", "order", "the window's end (to) must come after its start (from)"
        )
    first = None if from_ms is None else from_ms // MINUTE_MS
    last = None if to_ms is None else (to_ms - 1) // MINUTE_MS
    return first, last


def build_forecast(
    minutes: Mapping[int, MinuteCounts],
    seconds: Mapping[int, Mapping[int, int]],
    *,
    by: Granularity,
    topic: str | None = None,
    hot_over: int = DEFAULT_HOT_OVER,
) -> Forecast:
    """Group per-minute counts into buckets of ``by``, and list the hot instants.

    ``seconds`` maps a minute to its counts per second of the minute (all topics);
    only minutes with more than ``hot_over`` pending need be there.
    """
    length_ms = BUCKET_MS[by]
    buckets: dict[int, Bucket] = {}
    for minute in sorted(minutes):
        counts = minutes[minute]
        count = counts.count(topic)
        if count <= 0:
            continue
        start_ms = minute * MINUTE_MS // length_ms * length_ms
        bucket = buckets.setdefault(start_ms, Bucket(start_ms, 0))
        topics = bucket.topics
        for name, n in counts.topics.items():
            if n > 0 and (topic is None or name == topic):
                topics[name] = topics.get(name, 0) + n
        buckets[start_ms] = Bucket(start_ms, bucket.count + count, topics)
    return Forecast(by, list(buckets.values()), hot_instants(seconds, hot_over), hot_over, topic)


def hot_instants(seconds: Mapping[int, Mapping[int, int]], hot_over: int) -> list[HotInstant]:
    """The seconds with more than ``hot_over`` messages due, in time order."""
    return [
        HotInstant((minute * 60 + second) * 1000, count)
        for minute in sorted(seconds)
        for second, count in sorted(seconds[minute].items())
        if count > hot_over
    ]


def hot_candidates(minutes: Mapping[int, MinuteCounts], hot_over: int) -> Iterable[int]:
    """The minutes that may hold a hot instant: more than ``hot_over`` in their topics.

    Not their total: cancels of unknown topic subtract from their own seconds only,
    and one of an id never sent could hide another second's herd.
    """
    return [
        minute
        for minute, counts in minutes.items()
        if sum(max(n, 0) for n in counts.topics.values()) > hot_over
    ]
