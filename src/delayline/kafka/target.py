"""Kafka as where a shard's topics are: the one owner of the target's record.

A shard whose target is ``kafka:<brokers>`` (at least once) or
``kafka-exactly-once:<brokers>`` (set by the scheduler, see
:attr:`keys.ShardKeys.target`) readies its due messages; its pump hands them to
a flusher (kafka/flushing.py), which writes them to their Kafka topics and
settles them in Redis (docs/design.md, "Delivery into Kafka"). Pure: no client.
"""

from __future__ import annotations

from enum import Enum

from delayline.errors import ConfigurationError


class KafkaDelivery(Enum):
    """The guarantee of delivery into Kafka (``--kafka-delivery``)."""

    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"


#: Each delivery's target scheme (the brokers' list follows it).
SCHEMES = {KafkaDelivery.AT_LEAST_ONCE: "kafka:", KafkaDelivery.EXACTLY_ONCE: "kafka-exactly-once:"}


def target_url(brokers: str, delivery: KafkaDelivery = KafkaDelivery.AT_LEAST_ONCE) -> str:
    """The target recorded for Kafka's topics at ``brokers``, delivered as ``delivery`` says."""
    return SCHEMES[delivery] + brokers


def parse_target(recorded: str) -> tuple[KafkaDelivery, str]:
    """The delivery and the brokers of a recorded target. Raises ConfigurationError for
    a target this version does not know."""
    for delivery, scheme in SCHEMES.items():
        if recorded.startswith(scheme) and recorded != scheme:
            return delivery, recorded.removeprefix(scheme)
    known = " or ".join(f"{scheme}<brokers>" for scheme in SCHEMES.values())
    raise ConfigurationError(f"unknown delivery target {recorded!r} (expected {known})")
