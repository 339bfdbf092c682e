"""The scheduler source's side of Kafka: the inbound topic producers write to.

Each partition of the topic is one feed of the scheduler's source
(scheduler/pipeline/source.py), read by offset ranges ``[start, end)``: the offsets
live in Spark's checkpoint, so a batch replays exactly. Reads are
``read_committed``, so an aborted transaction's records never enter. Once
Spark commits a batch, its offsets are committed to the consumer group
``delayline-scheduler`` too: Kafka's own tools show the scheduler's lag, a
new checkpoint (after a drain) starts where the old one stopped, and the
raw cancels that wait past them are found at a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
    AdminClient,
    NewTopic,
    OffsetSpec,
)

from delayline.errors import ConfigurationError, TransportError
from delayline.kafka import records

T = TypeVar("T")

#: The consumer group whose offsets follow what the scheduler has committed.
GROUP = "delayline-scheduler"
#: How long one metadata or offsets request may take, s.
REQUEST_TIMEOUT_S = 10.0
#: The same, while a batch is planned: the Redis feeds and the timers wait for it.
PLANNING_TIMEOUT_S = 1.0
#: A read that waits for the brokers says so this often, s.
_WAIT_REPORT_S = 30.0

log = logging.getLogger(__name__)


class KafkaInbound:
    """The inbound ``topic`` of the Kafka brokers at ``brokers`` (``host:port,...``)."""

    def __init__(self, brokers: str, topic: str = records.INBOUND_TOPIC) -> None:
        self.brokers = brokers
        self.topic = topic
        common: dict[str, Any] = {"bootstrap.servers": brokers, "logger": log}
        self._admin = AdminClient(common)
        self._consumer = Consumer(
            {
                **common,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                # The end of what is there ends a read whose last offsets hold no
                # record for us (a transaction's marker, an aborted record).
                "enable.partition.eof": True,
                # Offsets that retention deleted: go on from the oldest kept.
                "auto.offset.reset": "earliest",
                # A fetch at the end of a partition waits this long for more on the
                # broker, and the next read's first fetch waits for it (default 500).
                "fetch.wait.max.ms": 10,
            }
        )

    def ensure_topic(self, partitions: int) -> None:
        """Create the topic with ``partitions`` partitions unless it exists, and wait
        until each partition has a leader (until then, listing its offsets fails).

        Raises TransportError if the brokers do not answer, refuse, or elect no
        leaders within REQUEST_TIMEOUT_S.
        """
        if self._partitions_or_none() is None:
            future = self._admin.create_topics([NewTopic(self.topic, partitions)])[self.topic]
            try:
                future.result(REQUEST_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TransportError(f"cannot create Kafka topic {self.topic}: {exc}") from exc
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while not self._led():
            if time.monotonic() > deadline:
                raise TransportError(f"Kafka topic {self.topic} has partitions without a leader")
            time.sleep(0.05)

    def _led(self) -> bool:
        """True if the topic exists and every partition of it has a leader."""
        topic = self._topic_metadata(REQUEST_TIMEOUT_S)
        if topic is None or not topic.partitions:
            return False
        return all(partition.leader >= 0 for partition in topic.partitions.values())

    def partitions(self, timeout_s: float = REQUEST_TIMEOUT_S) -> list[int]:
        """The topic's partitions. Raises ConfigurationError if it does not exist,
        TransportError if the brokers do not answer within ``timeout_s``."""
        found = self._partitions_or_none(timeout_s)
        if found is None:
            raise ConfigurationError(
                f"Kafka topic {self.topic} does not exist at {self.brokers}: create it, "
                "or let delayline run --kafka create it"
            )
        return found

    def _partitions_or_none(self, timeout_s: float = REQUEST_TIMEOUT_S) -> list[int] | None:
        topic = self._topic_metadata(timeout_s)
        return None if topic is None else sorted(topic.partitions)

    def _topic_metadata(self, timeout_s: float) -> Any:
        """The topic's metadata from the brokers, or None if it does not exist."""
        metadata = self._kafka(
            "read the topic's metadata",
            lambda: self._admin.list_topics(self.topic, timeout=timeout_s),
        )
        topic = metadata.topics.get(self.topic)
        return None if topic is None or topic.error is not None else topic

    def ends(self, partitions: list[int], timeout_s: float = REQUEST_TIMEOUT_S) -> dict[int, int]:
        """Each partition's end: the offset after its last committed record."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        return self._list_offsets(partitions, latest, timeout_s)

    def starts(self, partitions: list[int]) -> dict[int, int]:
        """Where a partition new to the checkpoint starts: the group's committed offset,
        or the partition's oldest record."""
        if not partitions:
            return {}
        wanted = [TopicPartition(self.topic, p) for p in partitions]
        committed = self._kafka(
            "read the group's offsets",
            lambda: self._consumer.committed(wanted, timeout=REQUEST_TIMEOUT_S),
        )
        starts = {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
        missing = [p for p in partitions if p not in starts]
        if missing:
            earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            starts.update(self._list_offsets(missing, earliest, REQUEST_TIMEOUT_S))
        return starts

    def _list_offsets(
        self, partitions: list[int], spec: OffsetSpec, timeout_s: float
    ) -> dict[int, int]:
        if not partitions:
            return {}
        asked = {TopicPartition(self.topic, p): spec for p in partitions}

        def call() -> dict[int, int]:
            futures = self._admin.list_offsets(asked, request_timeout=timeout_s)
            return {tp.partition: f.result(timeout_s).offset for tp, f in futures.items()}

        return self._kafka("list the topic's offsets", call)

    def read(
        self, partition: int, start: int, end: int, batch: int = 1000
    ) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """(entry id, v1 fields) of each record at offsets ``start <= offset < end`` of
        ``partition``, in order. While the brokers are away it waits for them, as the
        source's Redis reads do: a failed task would stop the query."""
        if start >= end:
            return
        self._consumer.assign([TopicPartition(self.topic, partition, start)])
        waited_s = 0.0
        next_offset = start
        try:
            while True:
                # consume(n) waits until n records came or the timeout passed: ask for no
                # more than the range holds, which are in the log already.
                got = self._consumer.consume(min(batch, end - next_offset), 1.0)
                if not got:
                    waited_s += 1.0
                    if waited_s >= _WAIT_REPORT_S:
                        log.warning("waiting for Kafka %s/%d at %s", self.topic, partition, start)
                        waited_s = 0.0
                    continue
                waited_s = 0.0
                for message in got:
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            return
                        log.warning("reading Kafka %s/%d: %s", self.topic, partition, error)
                        continue
                    offset = message.offset() or 0
                    if offset >= end:
                        return
                    next_offset = offset + 1
                    # A consumer's headers are a list (a dict only for a producer's).
                    headers = cast(list[tuple[str, bytes | None]], message.headers())
                    yield (
                        records.entry_id(message.timestamp()[1], partition, offset),
                        records.from_inbound(message.key(), message.value(), headers),
                    )
                    if offset == end - 1:
                        return
        finally:
            self._consumer.unassign()

    def commit(self, offsets: Mapping[int, int]) -> None:
        """Commit ``offsets`` (partition -> next offset) to the group, without waiting:
        the checkpoint holds the offsets that count, and a commit must not hold the
        batches while the brokers are away."""
        done = [TopicPartition(self.topic, p, offset) for p, offset in offsets.items()]
        if done:
            self._kafka(
                "commit the group's offsets",
                lambda: self._consumer.commit(offsets=done, asynchronous=True),
            )

    def close(self) -> None:
        self._consumer.close()

    def _kafka(self, action: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except KafkaException as exc:
            raise TransportError(f"cannot {action} at {self.brokers}: {exc}") from exc
