"""What a producer asks of a schedule, as an inbound record (format 1), and the wheel key
that holds the schedule (pure).

A schedule's definition travels like a send, through the inbound stream, so that
the scheduler's state is its one home::

    v=1 op=schedule action=put topic=<topic> name=<name> definition=<JSON> [sent_at_ms=<int>]
        [counted=<from_ms>:<until_ms>]
    v=1 op=schedule action=delete|pause|resume topic=<topic> name=<name> [sent_at_ms=<int>]

``definition`` is :meth:`~delayline.schedules.spec.Schedule.to_json`'s, and names
the same topic and name. ``counted``, which ``delayline drain`` writes, names the
runs the drained checkpoint counted ahead in the forecast
(:mod:`delayline.schedules.ahead`): the put takes them back. Every record of one
schedule goes to the same inbound stream (:func:`shard_of`), so the scheduler reads
them in the order they were written; the record's stream entry id is the version it
gives the schedule.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from typing import NamedTuple

from delayline import timing
from delayline.errors import DecodeError, ValidationError, quoted
from delayline.schedules.spec import Schedule, validate_name
from delayline.validation import Limits, validate_topic

OP_SCHEDULE = b"schedule"
#: What a schedule's record weighs against a batch's cap (``--max-batch-rows``), any
#: other record weighing 1: of a batch's time, a send costs about 0.06-0.1 ms and a
#: new schedule about 0.6 ms (its first firing hands runs over too). Counted alike,
#: 99,000 new schedules went in batches of up to 32 s (bench/notes.md, "A schedule's
#: record weighs ten"; lua/last_id_within.lua weighs them).
SCHEDULE_WEIGHT = 10
PUT = "put"
DELETE = "delete"
PAUSE = "pause"
RESUME = "resume"
#: What an ``op=schedule`` record may ask.
ACTIONS = (PUT, DELETE, PAUSE, RESUME)
#: Schedules are held in wheel keys whose slot is at or below this one (negative, so
#: no time slot is one), a slot per address hash.
SCHEDULE_SLOT_MS = -2
#: Bits of an address's hash in its slot: distinct slots for every schedule but by
#: a chance of about n² / 2^55 among n schedules (a key holds each one that shares it),
#: and few enough that the wheel key stays within 64 bits.
_SLOT_HASH_BITS = 54


class ScheduleOp(NamedTuple):
    """A put (with its ``definition``), delete, pause or resume of schedule ``(topic, name)``."""

    action: str
    topic: str
    name: str
    sent_at_ms: int
    definition: Schedule | None = None
    #: A drained put's runs counted ahead, from and until (epoch ms, both included).
    counted: tuple[int, int] | None = None

    def to_record(self) -> dict[bytes, bytes]:
        """The inbound stream record (format version 1)."""
        record = {
            b"v": b"1",
            b"op": OP_SCHEDULE,
            b"action": self.action.encode(),
            b"topic": self.topic.encode(),
            b"name": self.name.encode(),
            b"sent_at_ms": str(self.sent_at_ms).encode(),
        }
        if self.definition is not None:
            record[b"definition"] = self.definition.to_json().encode()
        if self.counted is not None:
            record[b"counted"] = encode_counted(self.counted).encode()
        return record


def decode_op(fields: Mapping[bytes, bytes], *, sent_at_ms: int, limits: Limits) -> ScheduleOp:
    """Decode and check an ``op=schedule`` record (its ``v`` and ``op`` already read).
    Raises DecodeError or ValidationError."""
    action = _text(fields, "action")
    if action not in ACTIONS:
        raise ValidationError(
            "action", "one_of", f"action must be one of {', '.join(ACTIONS)}; got {quoted(action)}"
        )
    topic = validate_topic(_text(fields, "topic"))
    name = validate_name(_text(fields, "name"))
    if action != PUT:
        return ScheduleOp(action, topic, name, sent_at_ms)
    definition = Schedule.from_json(_required(fields, "definition"), limits)
    if definition.address != (topic, name):
        raise ValidationError(
            "definition",
            "address",
            f"the definition is of {definition.topic}/{definition.name}, "
            f"not of the record's {topic}/{name}",
        )
    counted = fields.get(b"counted")
    return ScheduleOp(
        action,
        topic,
        name,
        sent_at_ms,
        definition,
        None if counted is None else decode_counted(counted),
    )


def encode_counted(counted: tuple[int, int]) -> str:
    """A drained put's ``counted`` field: ``<from_ms>:<until_ms>``."""
    return f"{counted[0]}:{counted[1]}"


def decode_counted(value: bytes | str) -> tuple[int, int]:
    """The inverse of :func:`encode_counted`. Raises ValidationError (field
    ``counted``) for anything else."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    from_text, _, until_text = text.partition(":")
    if not (from_text.isdigit() and until_text.isdigit()) or int(from_text) > int(until_text):
        raise ValidationError(
            "counted", "format", f"counted must be <from_ms>:<until_ms>; got {quoted(text)}"
        )
    return int(from_text), int(until_text)


def _required(fields: Mapping[bytes, bytes], name: str) -> bytes:
    value = fields.get(name.encode())
    if value is None:
        raise DecodeError(f"missing field {name!r}")
    return value


def _text(fields: Mapping[bytes, bytes], name: str) -> str:
    try:
        return _required(fields, name).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"field {name!r} is not UTF-8") from exc


def _address_hash(topic: str, name: str) -> bytes:
    return hashlib.blake2b(f"{topic}\0{name}".encode(), digest_size=8).digest()


def schedule_slot_ms(topic: str, name: str) -> int:
    """The wheel slot that holds schedule ``(topic, name)`` (at or below SCHEDULE_SLOT_MS)."""
    spread = int.from_bytes(_address_hash(topic, name), "big") >> (64 - _SLOT_HASH_BITS)
    return SCHEDULE_SLOT_MS - spread


def is_schedule_slot(slot_ms: int) -> bool:
    """Whether a wheel slot holds schedules rather than messages or rejects."""
    return slot_ms <= SCHEDULE_SLOT_MS


#: Every schedule key (:func:`schedule_key`) is below this wheel key, and every key of
#: a time slot or the reject slot at or above it: a scan over the state can tell them
#: apart by the key column alone.
SCHEDULE_KEYS_BELOW = timing.wheel_key(SCHEDULE_SLOT_MS + 1, 0)


def schedule_key(topic: str, name: str) -> int:
    """The wheel key (:func:`delayline.timing.wheel_key`) of schedule ``(topic, name)``."""
    return timing.wheel_key(schedule_slot_ms(topic, name), 0)


def shard_of(topic: str, name: str, shards: int) -> int:
    """The Redis shard whose inbound stream carries every record of ``(topic, name)``."""
    return zlib.crc32(f"{topic}\0{name}".encode()) % shards
