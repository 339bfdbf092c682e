"""Inbound record -> (wheel key, packed record): decode, validate, key by (slot, shard).

A record that fails for any reason becomes a reject carrying its original
fields and the reason; nothing here raises, so bad input never stops the query.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from delayline import ids, timing
from delayline.errors import DelaylineError
from delayline.model import Cancel, decode_record
from delayline.scheduler import packs
from delayline.validation import Limits


def entry_time_ms(entry_id: str) -> int:
    """The time (epoch ms) at which Redis accepted the stream entry ``entry_id``."""
    return int(entry_id.split("-", 1)[0])


#: The inbound field that marks a send handed down from a coarse slot (not a new message).
CASCADE_FIELD = b"cascade"


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
    """
    received_ms = entry_time_ms(entry_id)
    try:
        record = decode_record(fields, received_ms=received_ms, limits=limits)
    except DelaylineError as exc:
        return [reject(entry_id, fields, str(exc), shards=shards)]
    shard = ids.shard_of(record.id, shards)
    if isinstance(record, Cancel):
        cancel = packs.encode(packs.Record(packs.CANCEL, record.deliver_at_ms, record.id, entry_id))
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


def reject(
    entry_id: str, fields: Mapping[bytes, bytes], reason: str, *, shards: int
) -> tuple[int, bytes]:
    """A reject, spread over the reject slot's shards, with the original fields kept.

    Its ``id`` is the claimed id of a refused *send* (so ``status`` can answer
    "rejected"); a bad cancel says nothing about its id.
    """
    shard = zlib.crc32(entry_id.encode()) % shards
    claimed = fields.get(b"id", b"").decode("ascii", "replace")
    is_send = fields.get(b"op") == b"send" and ids.is_message_id(claimed)
    record = packs.Record(
        kind=packs.REJECT,
        deliver_at_ms=0,
        id=claimed if is_send else "",
        inbound_id=entry_id,
        body=packs.encode_fields(fields.items()),
        reason=reason,
    )
    return timing.wheel_key(timing.REJECT_SLOT_MS, shard), packs.encode(record)
