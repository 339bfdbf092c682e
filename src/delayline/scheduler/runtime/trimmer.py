"""Keeps the topic streams delayline writes within their retention (delayline/retention.py),
and the forecast's minute index within its counters' lifetime.

A daemon thread of the scheduler's process. Every TRIM_INTERVAL_S it reads
the topic streams the deliveries recorded, and for each one its consumer
groups' needs, then trims its head a bounded call at a time
(redis/retention.py). Nothing is trimmed on the delivery path: a message costs
its share of one periodic call per stream.
"""

from __future__ import annotations

from delayline.errors import DelaylineError, TransportError
from delayline.redis.retention import TopicStreams, is_not_a_stream
from delayline.retention import RetentionPolicy
from delayline.scheduler.background import Background
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import now_ms

#: Seconds between passes over the topic streams.
TRIM_INTERVAL_S = 1.0


class Trimmer(Background):
    """A daemon thread trimming the topic streams of the Redis at ``redis_url``."""

    def __init__(self, redis_url: str, policy: RetentionPolicy, shards: int) -> None:
        """``shards``: the Redis shard count whose topics sets the deliveries write."""
        self._redis_url = redis_url
        self._policy = policy
        self._shards = shards
        super().__init__("delayline-trimmer")
        #: The last failure of a pass, None once one succeeds.
        self.last_error: DelaylineError | None = None

    @classmethod
    def of(cls, settings: SchedulerSettings) -> Trimmer:
        return cls(settings.redis_url, settings.retention_policy, settings.inbound_shards)

    def _run(self) -> None:
        streams = TopicStreams.from_url(self._redis_url, patience_ms=0)
        try:
            while not self._stop.wait(TRIM_INTERVAL_S):
                try:
                    self.trim_all(streams)
                    self.last_error = None
                except DelaylineError as exc:
                    # Redis away, or refusing: the next pass tries again.
                    self.last_error = exc
        finally:
            streams.close()

    def trim_all(self, streams: TopicStreams) -> int:
        """One pass: trim every recorded topic stream as far as its retention lets it go;
        return how many entries went."""
        streams.forget_expired_minutes(self._shards, now_ms())
        removed = 0
        for topic in streams.registered(self._shards):
            retention = self._policy.for_topic(topic)
            if not retention.bounded:
                continue
            try:
                needed = streams.first_needed(topic)
                while not self._stop.is_set():
                    trimmed = streams.trim(topic, retention, needed)
                    removed += trimmed.removed
                    if not trimmed.more:
                        break
            except TransportError as exc:
                if not is_not_a_stream(exc):
                    raise
                # Deleted, or made another type, since: a delivery records it again.
                streams.forget(topic, self._shards)
        return removed
