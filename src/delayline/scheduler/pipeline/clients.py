"""The Redis and Kafka clients of a Python worker, one of each per URL.

Spark reuses a Python worker across tasks, so the source, the hand-off, the
sink and the processor's wakeups share these rather than connect per task (the
driver uses them too, to plan batches). Each waits as long as Redis needs to
come back (loading, restarting, out of disk): a task that failed instead would
be retried a few times and then stop the query; a task that waits resumes
where it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from delayline.kafka.inbound import KafkaInbound
from delayline.redis.inbound import InboundStream
from delayline.redis.store import DeliveryStore


@cache
def inbound_for(url: str) -> InboundStream:
    """The inbound client of the Redis at ``url`` in this worker."""
    return InboundStream.from_url(url, patience_ms=None)


@cache
def store_for(url: str, fence_token: int = 0) -> DeliveryStore:
    """The store client of the Redis at ``url`` in this worker, for the hand-off and
    the sink of a scheduler whose lease has ``fence_token`` (redis/lease.py)."""
    store = DeliveryStore.from_url(url, patience_ms=None)
    store.fence_token = fence_token
    return store


@cache
def kafka_inbound_for(brokers: str, topic: str) -> KafkaInbound:
    """The client of the Kafka inbound ``topic`` in this worker (and one on the driver)."""
    return KafkaInbound(brokers, topic)


def record_wakeups(redis_url: str, times_ms: Iterable[int]) -> None:
    """Record when state timers are due (epoch ms), for the source to wake a batch
    then (see ``InboundReader.latestOffset``)."""
    inbound_for(redis_url).add_wakeups(times_ms)
