"""The two ways ready messages are written to Kafka: at least once, or in transactions.

Both take a batch of held entries (kafka/topics.py) whose topics the brokers
have, and report what became of each (:class:`Reports`); the flusher
(kafka/flushing.py) settles those in Redis and holds the rest back.

- :class:`AtLeastOnceWriter`: an idempotent producer; a batch is produced and
  its acknowledgements are awaited while they keep coming (``ACK_STALL_S``),
  for ``ACK_WAIT_S`` at most. An entry still unacknowledged then stays in
  flight and is reported at a later call, so a slow partition never holds
  the others back for long. A crash between the produce and
  the settle in Redis writes the entry again.
- :class:`TransactionalWriter`: a transactional producer (``transactional.id``
  the pump's); each batch is one transaction that also writes the pump's
  progress record (kafka/progress.py), so a crash before the settle in Redis
  is mended by reading that record back, not by writing again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from delayline.errors import FencedError, TransportError
from delayline.faults import crash_point
from delayline.kafka import progress, records
from delayline.kafka.producing import produce
from delayline.kafka.topics import Held
from delayline.timing import now_ms
from delayline.validation import MAX_BODY_BYTES

#: How long a batch waits for its acknowledgements before the pump moves on, s at most.
ACK_WAIT_S = 1.0
#: A batch stops waiting when no acknowledgement came for this long, s: one slow
#: partition holds the others back by this much at most.
ACK_STALL_S = 0.1
#: How long a record may wait for the brokers' acknowledgement before it fails and
#: its topic backs off, ms.
MESSAGE_TIMEOUT_MS = 10_000
#: A topic with records in flight and no acknowledgement for this long is slow: it
#: takes no more until they are reported, ms.
SLOW_TOPIC_MS = 1_000
#: Longest wait for a transaction's commit; past it, it is aborted and the topics
#: that did not answer back off, s.
COMMIT_TIMEOUT_S = 5.0
#: Longest wait for the brokers while a transactional producer starts or aborts, s.
REQUEST_TIMEOUT_S = 30.0
#: The crash points of a flush (delayline/faults.py), in the order they are reached.
CRASH_BEFORE_PRODUCE = "kafka-before-produce"
CRASH_BEFORE_COMMIT = "kafka-before-commit"
CRASH_BEFORE_SETTLE = "kafka-before-settle"
CRASH_AFTER_SETTLE = "kafka-after-settle"


@dataclass
class Reports:
    """What became of held entries given to a writer."""

    #: In their topics (committed, for a transaction).
    written: list[Held] = field(default_factory=list)
    #: Not written, and why (the flusher decides: a reject, or a try later).
    failed: list[tuple[Held, KafkaError]] = field(default_factory=list)
    #: Not written through no fault of their topic's (an aborted transaction): again now.
    again: list[Held] = field(default_factory=list)


class Writer(Protocol):
    """Writes held entries to their topics."""

    def recover(self) -> set[bytes]:
        """The ready entry ids a crash left written but not settled (settle them as
        delivered, never write them again). Raises TransportError."""
        ...

    def write(self, batch: list[Held]) -> Reports:
        """Write ``batch`` (it may be empty) and report on it and on earlier batches.
        Raises TransportError, or FencedError if another pump took over."""
        ...

    def in_flight(self) -> int:
        """Entries written and not yet reported."""
        ...

    def slow_topics(self, now_ms: int) -> set[str]:
        """Topics that take no more entries for now."""
        ...

    def close(self) -> None:
        """Wait (a while) for what is in flight."""
        ...


def _producer(brokers: str, **config: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": brokers,
            # Every record acknowledged by all in-sync replicas, and a retry inside the
            # producer never doubles one.
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            # Never create a topic by producing to it: an unknown topic is a reject.
            "allow.auto.create.topics": False,
            # Room for the largest body delayline accepts, with its headers: the
            # topic's own max.message.bytes decides (a refusal is a reject).
            "message.max.bytes": 2 * MAX_BODY_BYTES,
            # librdkafka's own lines (a broker away, ...) through logging, at their
            # levels, rather than straight to stderr.
            "logger": logging.getLogger(__name__),
            **config,
        }
    )


class AtLeastOnceWriter:
    """Produces with an idempotent producer and reports acknowledgements as they come."""

    def __init__(self, brokers: str) -> None:
        self.brokers = brokers
        self._producer = _producer(brokers)
        self._reports = Reports()
        self._in_flight: dict[str, int] = {}
        #: When each topic with records in flight last made progress, ms.
        self._progress_ms: dict[str, int] = {}
        #: The calls of write, and how many of the last one's records were reported.
        self._round = 0
        self._round_reported = 0

    def recover(self) -> set[bytes]:
        return set()

    def write(self, batch: list[Held]) -> Reports:
        crash_point(CRASH_BEFORE_PRODUCE)
        self._round += 1
        self._round_reported = 0
        waiting = 0
        for held in batch:
            topic = held.topic
            try:
                produce(self._producer, records.from_ready(held.entry[1]), self._report(held))
            except KafkaException as exc:  # refused before it left: too large, bad name
                self._reports.failed.append((held, exc.args[0]))
                continue
            if not self._in_flight.get(topic):
                self._progress_ms[topic] = now_ms()
            self._in_flight[topic] = self._in_flight.get(topic, 0) + 1
            waiting += 1
        crash_point(CRASH_BEFORE_COMMIT)
        self._producer.poll(0)  # the reports that came since the last call
        # This batch's acknowledgements, while they keep coming, for ACK_WAIT_S at most.
        deadline = time.monotonic() + ACK_WAIT_S
        while self._round_reported < waiting:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                break
            if not self._producer.poll(min(left_s, ACK_STALL_S)):
                break  # none for ACK_STALL_S: a partition is slow, the rest come later
        reports, self._reports = self._reports, Reports()
        return reports

    def _report(self, held: Held) -> Callable[[KafkaError | None, Any], None]:
        produced_in = self._round

        def on_delivery(error: KafkaError | None, _: Any) -> None:
            if produced_in == self._round:
                self._round_reported += 1
            topic = held.topic
            self._in_flight[topic] -= 1
            self._progress_ms[topic] = now_ms()
            if not self._in_flight[topic]:
                del self._in_flight[topic], self._progress_ms[topic]
            if error is None:
                self._reports.written.append(held)
            else:
                self._reports.failed.append((held, error))

        return on_delivery

    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    def slow_topics(self, now_ms: int) -> set[str]:
        return {t for t, at_ms in self._progress_ms.items() if now_ms - at_ms > SLOW_TOPIC_MS}

    def close(self) -> None:
        self._producer.flush(MESSAGE_TIMEOUT_MS / 1000)


class TransactionalWriter:
    """Writes each batch, with the pump's progress record, in one Kafka transaction.

    ``transactional.id`` is ``pump_id``: a second pump with the same id fences this
    one (its next write raises FencedError), and its start aborts this one's open
    transaction. Raises TransportError if the brokers do not answer in
    REQUEST_TIMEOUT_S.
    """

    def __init__(self, brokers: str, pump_id: str) -> None:
        self.brokers = brokers
        self.pump_id = pump_id
        progress.ensure_topic(brokers)
        self._producer = _producer(
            brokers,
            **{
                "transactional.id": pump_id,
                "transaction.timeout.ms": 60_000,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            },
        )
        self._call(
            "start a transactional producer",
            lambda: self._producer.init_transactions(REQUEST_TIMEOUT_S),
        )

    def _call(self, doing: str, step: Callable[[], object]) -> None:
        try:
            step()
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                raise FencedError(f"{self.pump_id} cannot {doing}: {error.str()}") from exc
            raise TransportError(f"{self.pump_id} cannot {doing}: {error.str()}") from exc

    def recover(self) -> set[bytes]:
        return progress.last_written(self.brokers, self.pump_id)

    def write(self, batch: list[Held]) -> Reports:
        if not batch:
            return Reports()
        crash_point(CRASH_BEFORE_PRODUCE)
        errors: dict[int, KafkaError] = {}
        reported: set[int] = set()
        refused: list[tuple[Held, KafkaError]] = []
        sent: list[tuple[int, Held]] = []

        def report(n: int) -> Callable[[KafkaError | None, Any], None]:
            def on_delivery(error: KafkaError | None, _: Any) -> None:
                reported.add(n)
                if error is not None:
                    errors[n] = error

            return on_delivery

        self._call("begin a transaction", self._producer.begin_transaction)
        for n, held in enumerate(batch):
            try:
                produce(self._producer, records.from_ready(held.entry[1]), report(n))
            except KafkaException as exc:  # refused before it left: too large, bad name
                refused.append((held, exc.args[0]))
                continue
            sent.append((n, held))
        ids = [held.entry[0] for _, held in sent]
        progress_record = records.KafkaRecord(
            progress.TOPIC, self.pump_id.encode(), progress.encode(ids), []
        )
        produce(self._producer, progress_record, lambda error, _: None)
        crash_point(CRASH_BEFORE_COMMIT)
        try:
            self._producer.commit_transaction(COMMIT_TIMEOUT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                raise FencedError(f"{self.pump_id} cannot commit: {error.str()}") from exc
            # Which topics failed, before the abort purges (and so fails) the rest.
            failed = {
                n: errors.get(n, _TIMED_OUT) for n, _ in sent if n not in reported or n in errors
            }
            self._call(
                "abort a transaction", lambda: self._producer.abort_transaction(REQUEST_TIMEOUT_S)
            )
            return Reports(
                failed=refused + [(held, failed[n]) for n, held in sent if n in failed],
                again=[held for n, held in sent if n not in failed],
            )
        return Reports(written=[held for _, held in sent], failed=refused)

    def in_flight(self) -> int:
        return 0

    def slow_topics(self, now_ms: int) -> set[str]:
        return set()

    def close(self) -> None:
        """Nothing waits: every transaction is committed or aborted before write returns."""


#: What an entry that was not acknowledged before the commit gave up reports.
_TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT, "not acknowledged before the commit gave up")
