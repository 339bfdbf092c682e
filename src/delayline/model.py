"""The message model and the inbound record format (version 1).

An inbound record is one Redis Streams entry on ``delayline:inbound``; every
value is a byte string. Producers in any language may write it directly::

    v=1 op=send id=<id> topic=<topic> body=<bytes> deliver_at_ms=<int>
        [key=<str>] [headers=<JSON object of strings>] [sent_at_ms=<int>] [attempt=<int>=1]
    v=1 op=cancel id=<id> [sent_at_ms=<int>]
    v=1 op=schedule action=put|delete|pause|resume topic=<topic> name=<name> ...

(``op=schedule``'s fields are :mod:`delayline.schedules.ops`'s.) The id must be one
that :func:`delayline.ids.new_message_id` made for the same ``deliver_at_ms``.
Unknown extra fields are ignored, so later versions can add optional fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, NamedTuple

from delayline import ids
from delayline.errors import MAX_QUOTED_CHARS, DecodeError, ValidationError, quoted
from delayline.schedules.ops import OP_SCHEDULE, ScheduleOp, decode_op
from delayline.validation import (
    Limits,
    check_horizon,
    decode_headers,
    encode_headers,
    resolve_deliver_at_ms,
    validate_body,
    validate_headers,
    validate_key,
    validate_topic,
)

#: The record format version this code writes and reads.
RECORD_VERSION = b"1"
OP_SEND = b"send"
OP_CANCEL = b"cancel"
OP_RESCHEDULE = b"reschedule"
#: The largest ``attempt``: it travels through the scheduler as a signed 32-bit integer.
MAX_ATTEMPT = 2**31 - 1
#: The most digits an integer field may have: every epoch ms and attempt fits in 19.
MAX_INT_DIGITS = 19

RecordFields = Mapping[bytes, bytes]

#: The headers of a message without any: shared, so it must not be mutable.
NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class Message(NamedTuple):
    """A message waiting for its delivery time. Times are epoch ms.

    A named tuple, as dramatiq's Message is: immutable, and cheap to build on
    the scheduler's hot path.
    """

    id: str
    topic: str
    body: bytes
    deliver_at_ms: int
    sent_at_ms: int
    key: str | None = None
    headers: Mapping[str, str] = NO_HEADERS
    attempt: int = 1

    @classmethod
    def create(
        cls,
        topic: str,
        body: bytes | str,
        *,
        now_ms: int,
        limits: Limits,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
        attempt: int = 1,
    ) -> Message:
        """A new, validated message with a fresh id. Raises ValidationError."""
        deliver_at_ms = resolve_deliver_at_ms(
            now_ms=now_ms, limits=limits, delay=delay, deliver_at=deliver_at, level=level
        )
        return cls(
            id=ids.new_message_id(deliver_at_ms),
            topic=validate_topic(topic),
            body=validate_body(body, limits),
            deliver_at_ms=deliver_at_ms,
            sent_at_ms=now_ms,
            key=validate_key(key),
            headers=validate_headers(headers, limits),
            attempt=_positive_int("attempt", attempt),
        )

    def to_record(self) -> dict[bytes, bytes]:
        """The inbound stream record (format version 1) of this message."""
        record = {
            b"v": RECORD_VERSION,
            b"op": OP_SEND,
            b"id": self.id.encode(),
            b"topic": self.topic.encode(),
            b"body": self.body,
            b"deliver_at_ms": str(self.deliver_at_ms).encode(),
            b"sent_at_ms": str(self.sent_at_ms).encode(),
            b"attempt": str(self.attempt).encode(),
        }
        if self.key is not None:
            record[b"key"] = self.key.encode()
        if self.headers:
            record[b"headers"] = encode_headers(self.headers).encode()
        return record


class Cancel(NamedTuple):
    """A request that message ``id`` never be delivered; or, with ``rescheduled_to``,
    that a copy of it be delivered instead as that message id (and at its time)."""

    id: str
    sent_at_ms: int
    rescheduled_to: str | None = None

    @property
    def deliver_at_ms(self) -> int:
        """When the cancelled message is due; a cancel is routed to that slot."""
        return ids.deliver_at_ms_of(self.id)

    def to_record(self) -> dict[bytes, bytes]:
        """The inbound stream record (format version 1) of this cancel or reschedule."""
        if self.rescheduled_to is None:
            return {
                b"v": RECORD_VERSION,
                b"op": OP_CANCEL,
                b"id": self.id.encode(),
                b"sent_at_ms": str(self.sent_at_ms).encode(),
            }
        return {
            b"v": RECORD_VERSION,
            b"op": OP_RESCHEDULE,
            b"id": self.id.encode(),
            b"new_id": self.rescheduled_to.encode(),
            b"sent_at_ms": str(self.sent_at_ms).encode(),
        }


#: The keys a mapping given to ``send_many`` (or the HTTP batch) may have.
SEND_ARGUMENTS = frozenset({"topic", "body", "delay", "deliver_at", "level", "key", "headers"})


def message_from(item: Mapping[str, Any] | Message, *, now_ms: int, limits: Limits) -> Message:
    """A validated message from ``send`` keyword arguments, or a Message checked again.

    Raises ValidationError for an unknown argument or any rule a send must follow.
    """
    if isinstance(item, Message):
        return check_message(item, now_ms=now_ms, limits=limits)
    if not isinstance(item, Mapping):
        raise ValidationError("message", "type", "each message must be a mapping or a Message")
    unknown = sorted(set(item) - SEND_ARGUMENTS)
    if unknown:
        raise ValidationError(unknown[0], "unknown", f"unknown argument {quoted(unknown[0])}")
    if "topic" not in item or "body" not in item:
        missing = "topic" if "topic" not in item else "body"
        raise ValidationError(missing, "required", f"{missing} is required")
    arguments = {name: value for name, value in item.items() if name not in ("topic", "body")}
    return Message.create(item["topic"], item["body"], now_ms=now_ms, limits=limits, **arguments)


def check_message(message: Message, *, now_ms: int, limits: Limits) -> Message:
    """``message`` if it follows every rule (it may be hand-made). Raises ValidationError."""
    encoded_ms = ids.deliver_at_ms_of(message.id) if ids.is_message_id(message.id) else None
    if encoded_ms != message.deliver_at_ms:
        raise ValidationError(
            "id", "deliver_at", "id must be made by new_message_id(deliver_at_ms)"
        )
    check_horizon(message.deliver_at_ms, now_ms=now_ms, limits=limits, field="deliver_at")
    validate_topic(message.topic)
    validate_body(message.body, limits)
    validate_key(message.key)
    validate_headers(message.headers, limits)
    _positive_int("attempt", message.attempt)
    return message


def decode_record(
    fields: RecordFields, *, received_ms: int, limits: Limits
) -> Message | Cancel | ScheduleOp:
    """Decode and validate one inbound record.

    ``received_ms`` is when the store accepted the record (for Redis, the stream
    entry id's time); it is "now" for the max-delay rule, so a replayed record
    gets the same verdict. Raises DecodeError for a malformed record and
    ValidationError for one that breaks a rule.
    """
    version = fields.get(b"v")
    if version is None:
        raise DecodeError("missing field 'v' (record format version)")
    if version != RECORD_VERSION:
        raise DecodeError(f"unsupported record version {_show(version)}; this scheduler reads 1")
    op = fields.get(b"op")
    if op == OP_SCHEDULE:
        sent_at_ms = _int_field(fields, "sent_at_ms", default=received_ms)
        return decode_op(fields, sent_at_ms=sent_at_ms, limits=limits)
    if op not in (OP_SEND, OP_CANCEL, OP_RESCHEDULE):
        raise DecodeError(
            f"unknown op {_show(op)}; expected 'send', 'cancel', 'reschedule' or 'schedule'"
        )
    message_id = _text(fields, "id")
    if not ids.is_message_id(message_id):
        raise ValidationError("id", "format", f"not a delayline message id: {quoted(message_id)}")
    sent_at_ms = _int_field(fields, "sent_at_ms", default=received_ms)
    if op in (OP_CANCEL, OP_RESCHEDULE):
        # A cancel request is kept until its message is due: none for a time no send
        # could have asked for.
        due_ms = ids.deliver_at_ms_of(message_id)
        check_horizon(due_ms, now_ms=received_ms, limits=limits, field="id")
    if op == OP_CANCEL:
        return Cancel(id=message_id, sent_at_ms=sent_at_ms)
    if op == OP_RESCHEDULE:
        new_id = _text(fields, "new_id")
        if not ids.is_message_id(new_id):
            raise ValidationError(
                "new_id", "format", f"not a delayline message id: {quoted(new_id)}"
            )
        # Refused here, the record cancels nothing: the original stays.
        new_due_ms = ids.deliver_at_ms_of(new_id)
        check_horizon(new_due_ms, now_ms=received_ms, limits=limits, field="new_id")
        return Cancel(id=message_id, sent_at_ms=sent_at_ms, rescheduled_to=new_id)

    deliver_at_ms = _int_field(fields, "deliver_at_ms")
    if ids.deliver_at_ms_of(message_id) != deliver_at_ms:
        raise ValidationError(
            "id", "deliver_at", f"id {message_id} does not encode deliver_at_ms {deliver_at_ms}"
        )
    check_horizon(deliver_at_ms, now_ms=received_ms, limits=limits, field="deliver_at_ms")
    key = fields.get(b"key")
    return Message(
        id=message_id,
        topic=validate_topic(_text(fields, "topic")),
        body=validate_body(_required(fields, "body"), limits),
        deliver_at_ms=deliver_at_ms,
        sent_at_ms=sent_at_ms,
        key=None if key is None else validate_key(_decode_utf8("key", key)),
        headers=decode_headers(_decode_utf8("headers", fields.get(b"headers", b"")), limits),
        attempt=_positive_int("attempt", _int_field(fields, "attempt", default=1)),
    )


def _required(fields: RecordFields, name: str) -> bytes:
    value = fields.get(name.encode())
    if value is None:
        raise DecodeError(f"missing field {name!r}")
    return value


def _decode_utf8(name: str, value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"field {name!r} is not UTF-8") from exc


def _text(fields: RecordFields, name: str) -> str:
    return _decode_utf8(name, _required(fields, name))


def _int_field(fields: RecordFields, name: str, default: int | None = None) -> int:
    raw = fields.get(name.encode())
    if raw is None:
        if default is None:
            raise DecodeError(f"missing field {name!r}")
        return default
    digits = raw[1:] if raw[:1] == b"-" else raw
    # bytes.isdigit is ASCII-only; the length bound also keeps int() below
    # Python's 4,300-digit conversion limit, which raises ValueError.
    if not digits.isdigit() or len(digits) > MAX_INT_DIGITS:
        raise DecodeError(
            f"field {name!r} must be a decimal integer of at most {MAX_INT_DIGITS} digits, "
            f"got {_show(raw)}"
        )
    return int(raw)


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPT:
        raise ValidationError(
            name,
            "range",
            f"{name} must be an integer from 1 to {MAX_ATTEMPT}, got {quoted(value)}",
        )
    return value


def _show(raw: bytes | None) -> str:
    if raw is None:
        return "(missing)"
    # Enough bytes for MAX_QUOTED_CHARS + 1 characters of up to 4 bytes: the
    # value may be megabytes, and quoted() shows only its start.
    return quoted(raw[: 4 * (MAX_QUOTED_CHARS + 1)].decode("utf-8", "replace"))
