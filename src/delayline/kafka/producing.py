"""Producing one record with librdkafka, waiting while its local queue is full."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer

from delayline.kafka.records import KafkaRecord

#: librdkafka's delivery report: the error (None: acknowledged) and the record.
OnDelivery = Callable[[KafkaError | None, Any], None]


def produce(producer: Producer, record: KafkaRecord, on_delivery: OnDelivery) -> None:
    """Hand ``record`` to ``producer``; while its queue is full, serve delivery reports
    until there is room. Raises KafkaException if the record is refused before it
    leaves (too large, a bad topic name)."""
    while True:
        try:
            producer.produce(
                record.topic,
                value=record.value,
                key=record.key,
                headers=record.headers,
                on_delivery=on_delivery,
            )
            return
        except BufferError:  # the local queue is full: let it drain
            producer.poll(0.1)
