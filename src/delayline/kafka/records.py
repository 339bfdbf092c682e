"""delayline's records in Kafka: the one owner of both layouts.

**Inbound** (a producer's record on the inbound topic, ``delayline.inbound`` by
default): the v1 record of the Redis inbound stream, field for field, with

- value: the ``body`` field (a cancel needs none);
- headers: every other field, each value its bytes (``v``, ``op``, ``id``,
  ``topic``, ``deliver_at_ms``, ...);
- key: the message's ``key``, when no ``key`` header gives it.

Its entry id (the inbound id of a reject) is ``<timestamp ms>-<seq>``, where
seq is ``2**63 + partition * 2**40 + offset``: unique, and never a Redis id.

**Delivered** (a due message on its topic):

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

from delayline.errors import DecodeError, ValidationError

ID_HEADER = "delayline-id"
DELIVER_AT_HEADER = "delayline-deliver-at-ms"
DELIVERED_AT_HEADER = "delayline-delivered-at-ms"
ATTEMPT_HEADER = "delayline-attempt"


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """What is produced to Kafka for one delivered message."""

    topic: str
    key: bytes | None
    #: None: no value (an inbound cancel has no body).
    value: bytes | None
    #: As the producer takes them (a value is bytes here).
    headers: list[tuple[str, str | bytes | None]]


@dataclass(frozen=True, slots=True)
class Delivered:
    """A delivered message as a consumer reads it back from its Kafka record."""

    id: str
    topic: str
    key: str | None
    body: bytes
    #: The message's own headers (not delayline's).
    headers: dict[str, str]
    deliver_at_ms: int
    attempt: int


DELAYLINE_HEADERS = frozenset({ID_HEADER, DELIVER_AT_HEADER, DELIVERED_AT_HEADER, ATTEMPT_HEADER})


def from_delivered(
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
) -> Delivered:
    """A delivered record read back. Raises DecodeError if delayline did not write it."""
    found = {name: (raw or b"").decode("utf-8", "replace") for name, raw in headers or ()}
    try:
        message_id, deliver_at_ms = found[ID_HEADER], int(found[DELIVER_AT_HEADER])
        attempt = int(found[ATTEMPT_HEADER])
    except (KeyError, ValueError) as exc:
        raise DecodeError(f"not a record delayline delivered ({exc}): {topic}") from exc
    return Delivered(
        id=message_id,
        topic=topic,
        key=None if key is None else key.decode("utf-8", "replace"),
        body=value or b"",
        headers={n: v for n, v in found.items() if n not in DELAYLINE_HEADERS},
        deliver_at_ms=deliver_at_ms,
        attempt=attempt,
    )


def from_ready(fields: Mapping[bytes, bytes]) -> KafkaRecord:
    """The record of a ready entry's ``fields`` (the topic entry's, plus ``topic``; see
    lua/topic_writes.lua)."""
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


#: The default topic producers write inbound records to.
INBOUND_TOPIC = "delayline.inbound"
#: Marks a Kafka entry id's seq (a Redis stream's seqs are far smaller).
_KAFKA_SEQ = 2**63
_OFFSET_BITS = 40


def to_inbound(fields: Mapping[bytes, bytes], topic: str = INBOUND_TOPIC) -> KafkaRecord:
    """The Kafka record on inbound ``topic`` of a v1 inbound record's ``fields``."""
    headers: list[tuple[str, str | bytes | None]] = [
        (name.decode(), value) for name, value in fields.items() if name != b"body"
    ]
    return KafkaRecord(
        topic=topic, key=fields.get(b"key"), value=fields.get(b"body"), headers=headers
    )


def from_inbound(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None
) -> dict[bytes, bytes]:
    """The v1 inbound record's fields of a Kafka record on the inbound topic (a header
    given twice: its last value)."""
    fields = {name.encode(): value or b"" for name, value in headers or ()}
    if value is not None:
        fields[b"body"] = value
    if key is not None:
        fields.setdefault(b"key", key)
    return fields


def entry_id(timestamp_ms: int, partition: int, offset: int) -> str:
    """The inbound entry id of the record at ``offset`` of ``partition``, stamped
    ``timestamp_ms`` (the time the max-delay rule and the horizon count from)."""
    return f"{max(timestamp_ms, 0)}-{_KAFKA_SEQ + (partition << _OFFSET_BITS) + offset}"


def console_headers(fields: Mapping[bytes, bytes]) -> str:
    """The headers of :func:`to_inbound` as kafka-console-producer reads them with
    ``parse.headers=true`` (``name:value,...``). Raises ValidationError if a value
    holds a comma, a colon or a tab, which that format cannot carry."""
    parts = []
    for name, value in fields.items():
        text = value.decode("utf-8", "replace")
        if name == b"body":
            continue
        if any(mark in text for mark in ",:\t"):
            raise ValidationError(
                name.decode(),
                "format",
                f"{name.decode()}: kafka-console-producer cannot carry {text!r}",
            )
        parts.append(f"{name.decode()}:{text}")
    return ",".join(parts)
