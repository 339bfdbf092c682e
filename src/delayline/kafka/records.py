"""A delivered message as a Kafka record: the one owner of its layout.

- topic: the message's topic;
- key: the message's key (none if it has none), so that the topic's
  partitioning follows the producer's key;
- value: the body, unchanged;
- headers: ``delayline-id``, ``delayline-deliver-at-ms``,
  ``delayline-delivered-at-ms`` and ``delayline-attempt`` (decimal text), then
  the message's own headers, each value as UTF-8.

Delivery to Kafka is at least once (docs/design.md): a consumer drops a repeat
by its ``delayline-id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

ID_HEADER = "delayline-id"
DELIVER_AT_HEADER = "delayline-deliver-at-ms"
DELIVERED_AT_HEADER = "delayline-delivered-at-ms"
ATTEMPT_HEADER = "delayline-attempt"


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """What is produced to Kafka for one delivered message."""

    topic: str
    key: bytes | None
    value: bytes
    #: As the producer takes them (a value is bytes here).
    headers: list[tuple[str, str | bytes | None]]


def from_ready(fields: Mapping[bytes, bytes]) -> KafkaRecord:
    """The record of a ready entry's ``fields`` (the topic entry's, plus ``topic``; see
    lua/delivery.lua)."""
    headers: list[tuple[str, str | bytes | None]] = [
        (ID_HEADER, fields[b"id"]),
        (DELIVER_AT_HEADER, fields[b"deliver_at_ms"]),
        (DELIVERED_AT_HEADER, fields[b"delivered_at_ms"]),
        (ATTEMPT_HEADER, fields[b"attempt"]),
    ]
    own: dict[str, str] = json.loads(fields.get(b"headers") or b"{}")
    headers += [(name, value.encode()) for name, value in own.items()]
    return KafkaRecord(
        topic=fields[b"topic"].decode(),
        key=fields.get(b"key") or None,
        value=fields[b"body"],
        headers=headers,
    )
