"""The exactly-once pump's progress in Kafka: the one owner of its topic and record.

Each transaction that writes ready messages to their topics also writes one
record to the compacted topic ``delayline.__pump``: key the pump's
transactional id, value the ready entry ids it wrote (``<id>,<id>,...``). The
transaction commits both or neither. A pump settles a transaction's entries in
Redis before it begins the next, so after a crash only its last record can
name entries still in the ready stream; it reads that record back with
``isolation.level=read_committed`` and settles them without writing them again.

Compaction keeps one record per pump; the topic's segments roll every
``SEGMENT_MS`` so that the cleaner can drop the others.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
    AdminClient,
    NewTopic,
)

from delayline.errors import TransportError

#: The progress topic: one partition, compacted.
TOPIC = "delayline.__pump"
#: How often its segments roll, so that compaction can drop superseded records, ms.
SEGMENT_MS = 600_000
#: Longest wait for the brokers while the progress is created or read, s.
REQUEST_TIMEOUT_S = 30.0


def encode(entry_ids: Sequence[bytes]) -> bytes:
    """The record's value: the ready entry ids one transaction wrote."""
    return b",".join(entry_ids)


def decode(value: bytes | None) -> set[bytes]:
    """The ready entry ids of a record's value."""
    return set(value.split(b",")) if value else set()


def ensure_topic(brokers: str) -> None:
    """Create the progress topic unless it exists (replicated as the brokers allow, up
    to 3). Raises TransportError if the brokers refuse or do not answer."""
    admin = AdminClient({"bootstrap.servers": brokers})
    try:
        metadata = admin.list_topics(TOPIC, timeout=REQUEST_TIMEOUT_S)
        found = metadata.topics.get(TOPIC)
        if found is not None and found.error is None:
            return
        replicas = min(3, len(metadata.brokers))
        config = {
            "cleanup.policy": "compact",
            "segment.ms": str(SEGMENT_MS),
            "min.insync.replicas": str(max(1, replicas - 1)),
        }
        future = admin.create_topics([NewTopic(TOPIC, 1, replicas, config=config)])[TOPIC]
        future.result(REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TransportError(f"cannot create Kafka topic {TOPIC} at {brokers}: {exc}") from exc


def last_written(brokers: str, pump_id: str) -> set[bytes]:
    """The ready entry ids of the last committed transaction of the pump ``pump_id``
    (empty if it never committed one).

    Reads the whole (compacted) topic up to its end with ``read_committed``: call it
    after the pump's ``init_transactions``, which settles its own last transaction
    either way. Raises TransportError if the end is not reached in REQUEST_TIMEOUT_S.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": f"{pump_id}-recovery",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    partition = TopicPartition(TOPIC, 0)
    key = pump_id.encode()
    found: set[bytes] = set()
    try:
        low, high = consumer.get_watermark_offsets(partition, timeout=REQUEST_TIMEOUT_S)
        if high <= low:
            return found
        consumer.assign([TopicPartition(TOPIC, 0, low)])
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        # The end as it was once the pump's own transaction was settled: with
        # read_committed the position passes it only when every transaction before
        # it (other pumps') is decided, so a committed record of ours is never missed.
        while True:
            for message in consumer.consume(500, 0.2):
                if message.error() is None and message.key() == key:
                    found = decode(message.value())
            [position] = consumer.position([partition])
            if position.offset >= high:
                return found
            if time.monotonic() > deadline:
                raise TransportError(
                    f"cannot read {TOPIC} at {brokers} to its end ({position.offset} of {high})"
                )
    except KafkaException as exc:
        raise TransportError(f"cannot read {TOPIC} at {brokers}: {exc}") from exc
    finally:
        consumer.close()
