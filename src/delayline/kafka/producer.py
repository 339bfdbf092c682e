"""The SDK's sends through Kafka: v1 records produced to the inbound topic.

A send returns once every in-sync replica has the record (an idempotent
producer, ``acks=all``); the scheduler then reads it as it reads the Redis
inbound stream, one batch later. Needs ``confluent-kafka`` (the ``kafka`` extra).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, Producer

from delayline.errors import TransportError
from delayline.kafka import records
from delayline.kafka.producing import produce

#: How long a send waits for the brokers' acknowledgement, s.
ACK_TIMEOUT_S = 30.0


class KafkaInboundProducer:
    """Produces inbound records to ``topic`` of the brokers at ``brokers`` (``host:port,...``)."""

    def __init__(self, brokers: str, topic: str = records.INBOUND_TOPIC) -> None:
        self.brokers = brokers
        self.topic = topic
        self._producer = Producer(
            {
                "bootstrap.servers": brokers,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": int(ACK_TIMEOUT_S * 1000),
                "logger": logging.getLogger(__name__),
            }
        )

    def send(self, batch: Sequence[Mapping[bytes, bytes]]) -> None:
        """Produce each v1 record of ``batch`` and wait for every acknowledgement.

        Raises TransportError if any record was not acknowledged: some of the
        batch may have been written (a retry writes them again; the scheduler
        delivers an id once).
        """
        failed: list[str] = []

        def on_delivery(error: KafkaError | None, _: object) -> None:
            if error is not None:
                failed.append(error.str())

        for fields in batch:
            record = records.to_inbound(fields, self.topic)
            try:
                produce(self._producer, record, on_delivery)
            except KafkaException as exc:  # refused before it left: too large, bad name
                raise TransportError(f"cannot send to Kafka at {self.brokers}: {exc}") from exc
        left = self._producer.flush(ACK_TIMEOUT_S)
        if left or failed:
            reason = failed[0] if failed else f"{left} not acknowledged in {ACK_TIMEOUT_S:g} s"
            raise TransportError(
                f"cannot send to Kafka topic {self.topic} at {self.brokers}: {reason}"
            )

    def close(self) -> None:
        """Wait (a while) for what is in flight."""
        self._producer.flush(ACK_TIMEOUT_S)
