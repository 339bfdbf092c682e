"""Inbound record -> (wheel key, packed record): decode, validate, key by (slot, shard).

A record that fails for any reason becomes a reject carrying its original
fields, cut to bounded sizes, and the reason; nothing here raises, so bad input
never stops the query.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from delayline import ids, timing
from delayline.errors import DelaylineError
from delayline.model import Cancel, decode_record
from delayline.redis import lua_source
from delayline.scheduler.pipeline import packs
from delayline.schedules.ops import ScheduleOp, encode_counted, schedule_key
from delayline.validation import Limits


def entry_time_ms(entry_id: str) -> int:
    """The time (epoch ms) at which Redis accepted the stream entry ``entry_id``."""
    return int(entry_id.split("-", 1)[0])


#: The inbound field that marks a send handed down from a coarse slot (not a new
#: message); spelled once, in the marker table shared with the Lua scripts.
CASCADE_FIELD = lua_source.CASCADE_FIELD


#: Fields the scheduler adds to a reject; an original field of the same name is
#: kept under ``original.<name>``.
REJECT_FIELDS = (b"reason", b"rejected_at_ms", b"inbound_id", b"truncated")
#: A reject keeps at most this many bytes of one original value (1 MiB), so that a
#: too-big body still shows what it was; a longer value is cut and TRUNCATION_MARK follows.
MAX_REJECT_VALUE_BYTES = 1024 * 1024
#: A reject keeps at most this many bytes of one original field name, cut the same way.
MAX_REJECT_NAME_BYTES = 256
#: A reject keeps at most this many original fields; Redis's Lua can pass only
#: about 4,000 arguments to the one XADD that writes it.
MAX_REJECT_FIELDS = 1000
#: A reject keeps at most this many bytes of original names and values, marks
#: included (4 MiB); fields past it are cut shorter, or left out.
MAX_REJECT_BYTES = 4 * 1024 * 1024
#: A reject's ``reason`` is at most this many UTF-8 bytes (1 KiB), ending in "…" if cut.
MAX_REASON_BYTES = 1024
#: Follows the kept part of a cut name or value; ``%d`` is the original size in bytes.
TRUNCATION_MARK = b"...[truncated from %d bytes]"
# Room for the mark with any size a value can have (20 digits).
_MARK_ROOM = len(TRUNCATION_MARK % 10**19)


def to_packed(
    entry_id: str,
    fields: Mapping[bytes, bytes],
    *,
    limits: Limits,
    wheel: timing.Wheel,
    shards: int,
) -> list[tuple[int, bytes]]:
    """The (wheel key, pack-format record) pairs for one inbound stream entry.

    A send goes to one key, at the level its delay calls for; a cancel goes to
    both levels of its message's time, so it finds the message wherever it is.
    Any error while reading the record makes it a reject: one record that
    raised here would fail the batch, and every replay of it, for good.
    """
    try:
        return _placed(entry_id, fields, limits=limits, wheel=wheel, shards=shards)
    except DelaylineError as exc:
        reason = str(exc)
    except Exception as exc:  # whatever it is, it must not stop the query (see above)
        reason = f"cannot read the record: {type(exc).__name__}: {exc}"
    return [reject(entry_id, fields, reason, shards=shards)]


def _placed(
    entry_id: str,
    fields: Mapping[bytes, bytes],
    *,
    limits: Limits,
    wheel: timing.Wheel,
    shards: int,
) -> list[tuple[int, bytes]]:
    received_ms = entry_time_ms(entry_id)
    record = decode_record(fields, received_ms=received_ms, limits=limits)
    if isinstance(record, ScheduleOp):
        return [
            (schedule_key(record.topic, record.name), packs.encode(schedule_op(record, entry_id)))
        ]
    shard = ids.shard_of(record.id, shards)
    if isinstance(record, Cancel):
        # A reschedule cannot wait for the slot: its new time may come first.
        kind = packs.CANCEL if record.rescheduled_to is None else packs.WITHDRAW
        cancel = packs.encode(
            packs.Record(
                kind, record.deliver_at_ms, record.id, entry_id, reason=record.rescheduled_to or ""
            )
        )
        fine = timing.slot_start_ms(record.deliver_at_ms, wheel.tick_ms)
        coarse = timing.slot_start_ms(record.deliver_at_ms, wheel.coarse_tick_ms)
        return [
            (timing.wheel_key(fine, shard), cancel),
            (timing.wheel_key(coarse, shard, coarse=True), cancel),
        ]
    slot_ms, coarse_level = wheel.place(record.deliver_at_ms, received_ms)
    send = packs.Record(
        kind=packs.SEND,
        deliver_at_ms=record.deliver_at_ms,
        id=record.id,
        inbound_id=entry_id,
        topic=record.topic,
        body=record.body,
        key=record.key or "",
        # Validated JSON as the producer wrote it: no need to encode it again.
        headers=fields.get(b"headers", b"").decode() or "{}",
        attempt=record.attempt,
    )
    return [(timing.wheel_key(slot_ms, shard, coarse=coarse_level), packs.encode(send))]


def schedule_op(op: ScheduleOp, entry_id: str) -> packs.Record:
    """A schedule's op as a pack record (see packs.SCHEDULE)."""
    return packs.Record(
        kind=packs.SCHEDULE,
        deliver_at_ms=entry_time_ms(entry_id),
        id="",
        inbound_id=entry_id,
        topic=op.topic,
        body=b"" if op.definition is None else op.definition.to_json().encode(),
        key=op.name,
        headers="" if op.counted is None else encode_counted(op.counted),
        reason=op.action,
    )


def reject(
    entry_id: str, fields: Mapping[bytes, bytes], reason: str, *, shards: int
) -> tuple[int, bytes]:
    """A reject, spread over the reject slot's shards, with the original fields kept.

    Its ``id`` is the claimed id of a refused *send* (so ``status`` can answer
    "rejected"); a bad cancel says nothing about its id. The fields are those
    of :func:`kept_fields` and the reason is cut to MAX_REASON_BYTES, so every
    reject fits a pack and the sink's script: this never raises.
    """
    shard = zlib.crc32(entry_id.encode()) % shards
    claimed = fields.get(b"id", b"")
    # Checked as bytes first: the claimed id may be megabytes of anything.
    claimed_id = claimed.decode("ascii", "replace") if len(claimed) == ids.ID_LENGTH else ""
    is_send = fields.get(b"op") == b"send" and ids.is_message_id(claimed_id)
    record = packs.Record(
        kind=packs.REJECT,
        deliver_at_ms=0,
        id=claimed_id if is_send else "",
        inbound_id=entry_id,
        body=packs.encode_fields(kept_fields(fields)),
        reason=bounded_reason(reason),
    )
    return timing.wheel_key(timing.REJECT_SLOT_MS, shard), packs.encode(record)


def kept_fields(fields: Mapping[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """What a reject keeps of a record's fields, in their order.

    A field named like one of REJECT_FIELDS is renamed ``original.<name>``.
    Names and values longer than MAX_REJECT_NAME_BYTES and MAX_REJECT_VALUE_BYTES
    keep their start followed by TRUNCATION_MARK; past MAX_REJECT_BYTES in all,
    values are cut shorter, and past MAX_REJECT_FIELDS fields, or when not even
    a cut field fits, fields are left out. If anything was cut or left out, a
    last field ``truncated`` says how many fields were.
    """
    kept: list[tuple[bytes, bytes]] = []
    room = MAX_REJECT_BYTES
    cut = 0
    for name, value in fields.items():
        renamed = b"original." + name if name in REJECT_FIELDS else name
        kept_name = _cut(renamed, MAX_REJECT_NAME_BYTES)
        space = room - len(kept_name)
        if len(kept) == MAX_REJECT_FIELDS:
            kept_value = None
        elif len(value) <= min(MAX_REJECT_VALUE_BYTES, space):
            kept_value = value
        else:
            # Cut, leaving room for the mark; if not even that fits, leave it out.
            value_room = min(MAX_REJECT_VALUE_BYTES, space - _MARK_ROOM)
            kept_value = _cut(value, value_room) if value_room >= 0 else None
        if kept_value is None:
            cut += 1
            continue
        kept.append((kept_name, kept_value))
        room -= len(kept_name) + len(kept_value)
        if kept_name is not renamed or kept_value is not value:  # _cut returns what fits as is
            cut += 1
    if cut:
        kept.append((b"truncated", str(cut).encode()))
    return kept


def _cut(data: bytes, limit: int) -> bytes:
    """``data`` itself if it has at most ``limit`` bytes, else its start and TRUNCATION_MARK."""
    if len(data) <= limit:
        return data
    return data[:limit] + TRUNCATION_MARK % len(data)


def bounded_reason(reason: str) -> str:
    """``reason`` in at most MAX_REASON_BYTES of UTF-8, ending in "…" if it was cut.

    Characters UTF-8 cannot encode (lone surrogates) become backslash escapes.
    """
    encoded = reason.encode("utf-8", "backslashreplace")
    if len(encoded) <= MAX_REASON_BYTES:
        return encoded.decode()
    ellipsis = "…"
    start = encoded[: MAX_REASON_BYTES - len(ellipsis.encode())]
    # A multi-byte character cut in two is dropped whole.
    return start.decode("utf-8", "ignore") + ellipsis
