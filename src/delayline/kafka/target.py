"""The producer that writes ready messages to their Kafka topics (librdkafka's).

A shard whose target is ``kafka:<brokers>`` (set by the scheduler, see
:attr:`keys.ShardKeys.target`) readies its due messages; its pump gives them
to :meth:`KafkaTarget.deliver`, and settles them in Redis once Kafka has
acknowledged every one. A crash, or a broker that does not answer, between the
two writes them again: delivery to Kafka is at least once, each record
carrying its id (kafka/records.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from delayline.errors import ConfigurationError, TransportError
from delayline.kafka import records
from delayline.kafka.producing import OnDelivery, produce
from delayline.redis.store import ReadyEntry

#: The target of a shard whose topics are Kafka's: this and the brokers' list.
SCHEME = "kafka:"
#: How long a record may wait for the brokers' acknowledgement before a delivery
#: gives up on the call (it is written again at the next), ms.
MESSAGE_TIMEOUT_MS = 10_000
#: How long a topic may be unknown to the brokers before its messages are refused, ms.
UNKNOWN_TOPIC_MS = 5_000


class KafkaTarget:
    """Kafka's topics at ``brokers`` (``host:port,...``), an idempotent producer's."""

    def __init__(self, brokers: str) -> None:
        self.brokers = brokers
        self._producer = Producer(
            {
                "bootstrap.servers": brokers,
                # Every record acknowledged by all in-sync replicas, and a retry
                # inside the producer never doubles one.
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                # A topic the brokers do not know is refused (a reject) after this,
                # rather than timed out and tried again for ever.
                "topic.metadata.propagation.max.ms": UNKNOWN_TOPIC_MS,
                # librdkafka's own lines (a broker away, ...) through logging, at
                # their levels, rather than straight to stderr.
                "logger": logging.getLogger(__name__),
            }
        )

    def deliver(self, entries: Sequence[ReadyEntry]) -> dict[bytes, str]:
        """Produce each ready entry to its topic and wait for every acknowledgement;
        return why, for each one a topic refused for good. Raises TransportError if
        any was not acknowledged in time, or failed in a way a retry may mend."""
        refused: dict[bytes, str] = {}
        transient: list[str] = []

        def report(entry_id: bytes) -> OnDelivery:
            def on_delivery(error: KafkaError | None, _: Message[bytes, bytes]) -> None:
                if error is None:
                    return
                if error.retriable() or error.code() == KafkaError._MSG_TIMED_OUT:
                    transient.append(error.str())
                else:
                    refused[entry_id] = error.str()

            return on_delivery

        for entry_id, fields in entries:
            record = records.from_ready(fields)
            try:
                produce(self._producer, record, report(entry_id))
            except KafkaException as exc:  # refused before it left: too large, bad name
                refused[entry_id] = exc.args[0].str()
        left = self._producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 5)
        if left or transient:
            reason = transient[0] if transient else f"{left} not acknowledged"
            raise TransportError(f"cannot deliver to Kafka at {self.brokers}: {reason}")
        return refused

    def close(self) -> None:
        """Wait (a while) for what is in flight."""
        self._producer.flush(MESSAGE_TIMEOUT_MS / 1000)


def target_url(brokers: str) -> str:
    """The target recorded for Kafka's topics at ``brokers``."""
    return SCHEME + brokers


def target_for(recorded: str | None) -> KafkaTarget | None:
    """The target a shard's record names (None: Redis streams, no target).

    Raises ConfigurationError for a target this version does not know.
    """
    if recorded is None:
        return None
    if not recorded.startswith(SCHEME) or recorded == SCHEME:
        raise ConfigurationError(f"unknown delivery target {recorded!r} (expected kafka:<brokers>)")
    return KafkaTarget(recorded.removeprefix(SCHEME))
