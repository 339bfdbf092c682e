"""The consumer helpers' Kafka flavour: retry a delivered record later, or dead-letter it.

A Kafka consumer reads its topic with any client and commits as usual; delivery
is at least once, so it drops a repeat by the ``delayline-id`` header. When
handling fails, :func:`retry_later` sends the record back through delayline as
its next attempt, after the retry policy's delay (RocketMQ's, by default);
once the policy is used up, it goes to ``<topic>.DLQ`` at once, with the
reason in a ``dead-letter-reason`` header, as the Redis consumer's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from confluent_kafka import Message as KafkaMessage

from delayline import timing
from delayline.kafka import records
from delayline.model import Message
from delayline.plans.consuming import dlq_topic
from delayline.retry import RetryPolicy
from delayline.validation import Limits


class Sender(Protocol):
    """What sends the retry: a ``Client`` (with ``kafka=`` or not)."""

    limits: Limits

    def send_many(self, messages: Sequence[Message]) -> list[str]: ...


#: The header that says why a dead letter is one.
REASON_HEADER = "dead-letter-reason"
_DEFAULT_POLICY = RetryPolicy()


def retry_later(
    client: Sender,
    record: KafkaMessage[bytes, bytes],
    *,
    policy: RetryPolicy = _DEFAULT_POLICY,
    delay_ms: int | None = None,
) -> bool:
    """Send ``record``'s message again, as attempt + 1, after ``delay_ms`` (or the
    policy's delay) through ``client``; True. Once the policy is used up, send it
    to ``<topic>.DLQ`` now instead; False.

    Raises DecodeError if delayline did not deliver ``record``, TransportError if
    the send fails.
    """
    headers = cast(list[tuple[str, bytes | None]] | None, record.headers())
    delivered = records.from_delivered(record.topic() or "", record.key(), record.value(), headers)
    planned = policy.delay_after(delivered.attempt)
    own = delivered.headers
    if planned is None:
        topic, after_ms, attempt = dlq_topic(delivered.topic), 0, delivered.attempt
        own = own | {REASON_HEADER: policy.used_up}
    else:
        topic, attempt = delivered.topic, delivered.attempt + 1
        after_ms = planned if delay_ms is None else delay_ms
    message = Message.create(
        topic,
        delivered.body,
        now_ms=timing.now_ms(),
        limits=client.limits,
        delay=after_ms,
        key=delivered.key,
        headers=own,
        attempt=attempt,
    )
    client.send_many([message])
    return planned is not None
