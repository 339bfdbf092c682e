"""Packs: many message records in one binary value (pure).

The scheduler moves messages through Spark a pack at a time, one per wheel key
per batch, not a row at a time. Every state call and every Arrow-to-Python
conversion then costs per key, not per message. A record is a fixed header
followed by its variable fields::

    kind:u8 deliver_at_ms:i64 attempt:i32
    len(id):u16 len(topic):u16 len(body):u32 len(key):u16 len(headers):u32
    len(inbound_id):u16 len(reason):u16
    id topic body key headers inbound_id reason

Scanning reads only headers and ids; a record's bytes can be copied into
another pack without decoding its body.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from delayline.rows import Deliver

SEND = 1
CANCEL = 2
REJECT = 3
DELIVER = 4
DROP = 5
#: A send handed down from a coarse slot: re-appended to the inbound stream.
CASCADE = 6
#: A cancel applied as soon as it reaches its key, not when the slot fires: a
#: reschedule's (its ``reason`` holds the new id). It then stays as a cancel.
WITHDRAW = 7
#: The kinds that cancel the messages they name.
CANCELS = frozenset({CANCEL, WITHDRAW})
#: A schedule's op (put, delete, pause, resume: ``reason``), to its schedule's key:
#: ``topic`` and ``key`` hold its address, ``body`` a put's definition, ``inbound_id``
#: the entry that gives the schedule its version, ``headers`` a drained put's ``counted``
#: (schedules/ops.py).
SCHEDULE = 8
#: A run of a schedule handed to the outbox: delivered as DELIVER is, and counted
#: into the forecast as it is written, since no producer's send counted it.
RUN = 9
#: A run that a schedule's change cancels: a cancel request, as the SDK's cancel makes.
REVOKE = 10
#: A change of the forecast's count of ``topic``'s messages due in the minute starting
#: at ``deliver_at_ms``, by ``attempt`` (signed): a schedule's runs counted ahead.
FORECAST = 11
#: A RUN that its schedule counted ahead in the forecast already (schedules/ahead.py):
#: counted into the forecast's seconds only.
COUNTED_RUN = 12

_HEADER = struct.Struct("<BqiHHIHIHH")

#: The most UTF-8 bytes an id, topic, key, inbound id or reason can have (u16 lengths).
MAX_SHORT_BYTES = 0xFFFF
#: The most bytes a body or headers can have (u32 lengths).
MAX_LONG_BYTES = 0xFFFF_FFFF


class Record(NamedTuple):
    """One message, cancel or rejected inbound record.

    For a reject, ``body`` holds the original fields (see
    :func:`encode_fields`), ``reason`` the reason, and ``id`` the claimed id
    when the record was a send with a well-formed one.
    """

    kind: int
    deliver_at_ms: int
    id: str
    inbound_id: str
    topic: str = ""
    body: bytes = b""
    key: str = ""
    headers: str = ""
    attempt: int = 1
    reason: str = ""


def encode(record: Record) -> bytes:
    """The record's bytes in pack format.

    Raises ValueError, naming the field, if one is longer than its length can
    say (MAX_SHORT_BYTES or MAX_LONG_BYTES) or a number is out of its range.
    """
    id_, topic, key = record.id.encode(), record.topic.encode(), record.key.encode()
    headers, inbound, reason = (
        record.headers.encode(),
        record.inbound_id.encode(),
        record.reason.encode(),
    )
    lengths = (
        len(id_),
        len(topic),
        len(record.body),
        len(key),
        len(headers),
        len(inbound),
        len(reason),
    )
    try:
        header = _HEADER.pack(record.kind, record.deliver_at_ms, record.attempt, *lengths)
    except struct.error as exc:
        # struct's message names a format code, not the field that does not fit.
        raise ValueError(f"record does not fit a pack: {_misfit(record, lengths)}") from exc
    return b"".join((header, id_, topic, record.body, key, headers, inbound, reason))


_LENGTH_FIELDS = ("id", "topic", "body", "key", "headers", "inbound_id", "reason")
_LENGTH_LIMITS = (
    MAX_SHORT_BYTES,
    MAX_SHORT_BYTES,
    MAX_LONG_BYTES,
    MAX_SHORT_BYTES,
    MAX_LONG_BYTES,
    MAX_SHORT_BYTES,
    MAX_SHORT_BYTES,
)


def _misfit(record: Record, lengths: tuple[int, ...]) -> str:
    too_long = [
        f"{name} is {length} bytes, more than {limit}"
        for name, length, limit in zip(_LENGTH_FIELDS, lengths, _LENGTH_LIMITS, strict=True)
        if length > limit
    ]
    return "; ".join(too_long) or (
        f"kind={record.kind}, deliver_at_ms={record.deliver_at_ms}, attempt={record.attempt}"
    )


def pack(records: Iterable[Record]) -> bytes:
    """Many records in one pack."""
    return b"".join(encode(record) for record in records)


class Scanned(NamedTuple):
    """A record's routing facts and its raw bytes, without decoding the rest."""

    kind: int
    deliver_at_ms: int
    id: str
    raw: bytes

    def relabelled(self, kind: int) -> bytes:
        """The raw record with another kind (send -> deliver or drop)."""
        return bytes((kind,)) + self.raw[1:]


def scan(data: bytes) -> Iterator[Scanned]:
    """The records of a pack, in order, decoding only kind, time and id."""
    offset, end = 0, len(data)
    size = _HEADER.size
    while offset < end:
        kind, deliver_at_ms, _, id_len, *lengths = _HEADER.unpack_from(data, offset)
        record_end = offset + size + id_len + sum(lengths)
        id_ = data[offset + size : offset + size + id_len].decode()
        yield Scanned(kind, deliver_at_ms, id_, data[offset:record_end])
        offset = record_end


def deliver_at_ms_of(data: bytes) -> int:
    """The ``deliver_at_ms`` of a pack's first record, decoding nothing else."""
    deliver_at_ms: int = _HEADER.unpack_from(data)[1]
    return deliver_at_ms


def unpack(data: bytes) -> Iterator[Record]:
    """The records of a pack, fully decoded."""
    offset, end = 0, len(data)
    while offset < end:
        kind, deliver_at_ms, attempt, *lengths = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        fields = []
        for length in lengths:
            fields.append(data[offset : offset + length])
            offset += length
        id_, topic, body, key, headers, inbound, reason = fields
        yield Record(
            kind,
            deliver_at_ms,
            id_.decode(),
            inbound.decode(),
            topic.decode(),
            body,
            key.decode(),
            headers.decode(),
            attempt,
            reason.decode(),
        )


def encode_fields(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    """Name/value byte pairs (an inbound record's original fields) as bytes."""
    return b"".join(struct.pack("<II", len(n), len(v)) + n + v for n, v in pairs)


def decode_fields(data: bytes) -> list[tuple[bytes, bytes]]:
    """Inverse of :func:`encode_fields`."""
    pairs, offset = [], 0
    while offset < len(data):
        name_len, value_len = struct.unpack_from("<II", data, offset)
        offset += 8
        name = data[offset : offset + name_len]
        value = data[offset + name_len : offset + name_len + value_len]
        pairs.append((name, value))
        offset += name_len + value_len
    return pairs


def as_deliver(record: Record) -> Deliver:
    """A message record as the outbox and the sink take it."""
    return Deliver(
        topic=record.topic,
        id=record.id,
        body=record.body,
        key=record.key,
        headers=record.headers or "{}",
        deliver_at_ms=record.deliver_at_ms,
        attempt=record.attempt,
    )
