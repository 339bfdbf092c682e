"""One shard's ready stream, written to Kafka without a failing topic holding back the rest.

The pump's script moves due messages from the outbox to the shard's ready
stream (lua/topic_writes.lua); a :class:`KafkaFlusher` then, at each call:

1. settles first whatever an earlier call wrote but could not settle (Redis
   was away): nothing new is written before;
2. reads the ready entries it has not seen yet (a cursor in memory; after a
   start, every entry) and queues each behind its topic (kafka/topics.py);
3. takes, from each topic that is known to the brokers, not backing off and
   not slow, its queued entries, and hands them to the writer (at least once
   or in a transaction, kafka/writers.py). A message whose topic has been
   unknown for ``UNKNOWN_TOPIC_MS`` becomes a reject without being written;
4. settles in Redis what was written or refused for good; what failed in a
   way a retry may mend goes back to its queue, and its topic backs off.

At most ``MAX_HELD`` entries wait in memory (the rest wait in the ready
stream, in Redis): past it, no new entry is read until some are written. Each
topic with entries waiting is published with how long its oldest has waited
(``delayline_delivery_blocked_seconds``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from delayline.errors import TransportError
from delayline.faults import crash_point
from delayline.kafka.target import KafkaDelivery, parse_target
from delayline.kafka.topics import (
    ASK_AGAIN_MS,
    UNKNOWN_TOPIC_MS,
    Held,
    HeldEntries,
    TopicBackoff,
    TopicDirectory,
)
from delayline.kafka.writers import (
    CRASH_AFTER_SETTLE,
    CRASH_BEFORE_SETTLE,
    AtLeastOnceWriter,
    Reports,
    TransactionalWriter,
    Writer,
)
from delayline.redis import keys
from delayline.redis.store import DeliveryStore, Settled
from delayline.timing import now_ms

logger = logging.getLogger(__name__)

#: Most entries one call reads from the ready stream, and most it writes.
BATCH = 1_000
#: Most ready entries waiting in memory for their topics.
MAX_HELD = 20_000
#: How often the topics that wait are published, ms.
PUBLISH_EVERY_MS = 1_000
#: How soon to collect acknowledgements again while records are in flight, ms.
IN_FLIGHT_POLL_MS = 10
#: How long a question about a topic waits for the brokers, s.
METADATA_TIMEOUT_S = 5.0
#: How long a published list of waiting topics stands if no pump renews it, ms.
BLOCKED_TTL_MS = 10_000
#: Errors that say the topic is not (or no longer) there.
_UNKNOWN = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC})
#: Errors that refuse a record (or its whole batch) for its size.
_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
#: Errors a later try may mend, besides those librdkafka calls retriable.
_TRANSIENT = frozenset(
    {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._PURGE_INFLIGHT,
     KafkaError._PURGE_QUEUE, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
)  # fmt: skip


def unknown_topic_reason(topic: str) -> str:
    """Why a message to ``topic`` became a reject when Kafka did not have it."""
    return (
        f"Unknown topic or partition: Kafka has no topic {topic!r} "
        f"(asked for {UNKNOWN_TOPIC_MS} ms)"
    )


class KafkaFlusher:
    """Writes one shard's ready entries to Kafka with a writer that ``new_writer`` makes,
    asking ``topic_exists`` about topics it does not know."""

    def __init__(self, new_writer: Callable[[], Writer], topic_exists: Callable[[str], bool]):
        self._new_writer = new_writer
        self._topic_exists = topic_exists
        self._writer: Writer | None = None
        self._reset()

    def _reset(self) -> None:
        """Forget everything kept in memory, as a restart would: the ready stream is read
        again from its start, and a transactional writer's last commit is recovered."""
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._directory = TopicDirectory(self._topic_exists)
        self._held = HeldEntries()
        self._backoff = TopicBackoff()
        self._cursor: bytes | None = None
        self._recovered: set[bytes] = set()
        self._unsettled: list[Settled] = []
        self._published_ms = 0
        self._published_any = False
        self._warned: set[str] = set()

    def busy(self) -> bool:
        """Whether entries wait in memory or in flight (call again soon)."""
        writer = self._writer
        return (
            bool(self._held)
            or bool(self._unsettled)
            or (writer is not None and writer.in_flight() > 0)
        )

    def wake_in_ms(self, now_ms: int) -> int | None:
        """How soon to call again for what waits (None: only when the stream grows)."""
        if self._unsettled:
            return 0
        if self._writer is not None and self._writer.in_flight():
            return IN_FLIGHT_POLL_MS
        if not self._held:
            return None
        # A waiting topic not backing off is unknown (asked again every ASK_AGAIN_MS)
        # or slow (its records in flight, polled above).
        waits = [
            self._backoff.retry_at_ms(topic) or now_ms + ASK_AGAIN_MS
            for topic in self._held.topics()
        ]
        return max(min(waits) - now_ms, 0) if waits else None

    def flush(self, store: DeliveryStore, shard: keys.ShardKeys, journal_ttl_s: int) -> int:
        """One round (see the module's docstring); how many entries it read or settled
        (0: it made no progress, wait for :meth:`wake_in_ms` or the pump's bell).

        Raises TransportError if Redis or Kafka fails (what was written and not
        settled is settled at the next call), or FencedError if another pump took
        over this one's transactional id.
        """
        if self._unsettled:
            store.settle_ready(shard, journal_ttl_s, self._unsettled)
            self._unsettled = []
        if self._writer is None:
            self._writer = self._new_writer()
            self._recovered = self._writer.recover()
        writer = self._writer
        now = now_ms()
        settled: list[Settled] = []
        room = min(BATCH, MAX_HELD - len(self._held) - writer.in_flight())
        read = store.read_ready(shard, room, after=self._cursor) if room > 0 else []
        for entry in read:
            self._cursor = entry[0]
            if entry[0] in self._recovered:  # written by a transaction before a crash
                self._recovered.discard(entry[0])
                settled.append((entry, ""))
            else:
                self._held.add(entry, now)
        batch, refused = self._take(now)
        settled += refused
        try:
            reports = writer.write(batch)
        except Exception:
            # The writer's state is unknown (a transaction may have committed): start
            # over as after a crash. Nothing is settled that was not written.
            self._reset()
            raise
        settled += self._sort(reports, now)
        crash_point(CRASH_BEFORE_SETTLE)
        self._unsettled = settled
        store.settle_ready(shard, journal_ttl_s, settled)
        self._unsettled = []
        crash_point(CRASH_AFTER_SETTLE)
        self._publish(store, shard, now)
        return len(read) + len(settled)

    def _take(self, now: int) -> tuple[list[Held], list[Settled]]:
        """The held entries to write now, and those refused for an unknown topic (never
        raises: what it takes out of the queues, it returns)."""
        assert self._writer is not None
        batch: list[Held] = []
        refused: list[Settled] = []
        slow = self._writer.slow_topics(now)
        for topic in self._held.topics():
            first = self._held.first(topic)
            if first is not None and first.alone and self._backoff.open(topic, now):
                # A record whose batch the broker refused as too large goes alone, so
                # that it alone is refused if it is the one too large.
                return self._held.take(topic, 1), refused
        for topic in self._held.topics():
            if len(batch) >= BATCH:
                break
            if topic in slow or not self._backoff.open(topic, now):
                continue
            try:
                known = self._directory.knows(topic, now)
            except TransportError as exc:  # the brokers did not answer: try again later
                logger.warning("%s", exc)
                break
            if known:
                batch += self._held.take(topic, BATCH - len(batch))
                continue
            expired = self._held.take(topic, BATCH, tried_before_ms=now - UNKNOWN_TOPIC_MS + 1)
            refused += [(held.entry, unknown_topic_reason(topic)) for held in expired]
            if not self._held.waiting(topic):
                self._directory.forget_asked(topic)
        return batch, refused

    def _sort(self, reports: Reports, now: int) -> list[Settled]:
        """Settle what was written or refused for good; queue the rest again."""
        settled: list[Settled] = [(held.entry, "") for held in reports.written]
        for topic in {held.topic for held in reports.written}:
            self._backoff.succeed(topic)
        again = list(reports.again)
        for held, error in reports.failed:
            topic = held.topic
            if error.code() in _UNKNOWN:
                # Deleted, or not yet everywhere: ask again, within the message's budget.
                self._directory.forget(topic)
                again.append(held)
            elif error.code() in _TOO_LARGE and not held.alone:
                # The broker refuses a whole batch when one record is too large for
                # the topic: each of the batch is tried again alone.
                again.append(dataclasses.replace(held, alone=True))
            elif error.retriable() or error.code() in _TRANSIENT:
                self._backoff.fail(topic, now)
                again.append(held)
            else:
                settled.append((held.entry, error.str()))
        if again:
            self._held.put_back(again)
        return settled

    def blocked_ms(self, now_ms: int) -> dict[str, int]:
        """Each topic with entries waiting, and how long its oldest has waited, ms."""
        found: dict[str, int] = {}
        for topic in self._held.topics():
            oldest = self._held.oldest_try_ms(topic)
            if oldest is not None:
                found[topic] = now_ms - oldest
        return found

    def _publish(self, store: DeliveryStore, shard: keys.ShardKeys, now: int) -> None:
        if now - self._published_ms < PUBLISH_EVERY_MS:
            return
        blocked = self.blocked_ms(now)
        if blocked or self._published_any:
            store.record_blocked(shard, blocked, ttl_ms=BLOCKED_TTL_MS)
        for topic in blocked.keys() - self._warned:
            logger.warning("messages to Kafka topic %s wait: it does not take them yet", topic)
        self._warned = set(blocked)
        self._published_any = bool(blocked)
        self._published_ms = now

    def close(self) -> None:
        """Wait (a while) for what is in flight."""
        if self._writer is not None:
            self._writer.close()


def flusher_for(recorded: str | None, pump_id: str) -> KafkaFlusher | None:
    """The flusher for the target a shard's record names (None: Redis streams); a
    transactional one's id is ``pump_id``. Raises ConfigurationError for a target this
    version does not know."""
    if recorded is None:
        return None
    delivery, brokers = parse_target(recorded)
    admin = AdminClient({"bootstrap.servers": brokers})

    def topic_exists(topic: str) -> bool:
        try:
            found = admin.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise TransportError(f"cannot ask Kafka at {brokers} about {topic}: {exc}") from exc
        return found is not None and found.error is None

    def new_writer() -> Writer:
        if delivery is KafkaDelivery.EXACTLY_ONCE:
            return TransactionalWriter(brokers, pump_id)
        return AtLeastOnceWriter(brokers)

    return KafkaFlusher(new_writer, topic_exists)
