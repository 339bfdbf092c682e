"""Inbound record -> source row: decode, validate, and key by (slot, shard).

A record that fails for any reason becomes a reject row carrying its original
fields and the reason; nothing here raises, so bad input never stops the query.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from delayline import ids, timing
from delayline.errors import DelaylineError
from delayline.model import Cancel, decode_record
from delayline.scheduler.schemas import CANCEL, REJECT, SEND
from delayline.validation import Limits, encode_headers

SourceRow = tuple[Any, ...]


def entry_time_ms(entry_id: str) -> int:
    """The time (epoch ms) at which Redis accepted the stream entry ``entry_id``."""
    return int(entry_id.split("-", 1)[0])


def to_source_row(
    entry_id: str, fields: Mapping[bytes, bytes], *, limits: Limits, tick_ms: int, shards: int
) -> SourceRow:
    """The source row (schemas.SOURCE column order) for one inbound stream entry."""
    try:
        record = decode_record(fields, received_ms=entry_time_ms(entry_id), limits=limits)
    except DelaylineError as exc:
        return reject_row(entry_id, fields, str(exc), shards=shards)
    key = timing.wheel_key(
        timing.slot_start_ms(record.deliver_at_ms, tick_ms), ids.shard_of(record.id, shards)
    )
    if isinstance(record, Cancel):
        return (
            CANCEL,
            key,
            entry_id,
            record.id,
            None,
            None,
            None,
            None,
            record.deliver_at_ms,
            None,
            None,
            None,
        )
    return (
        SEND,
        key,
        entry_id,
        record.id,
        record.topic,
        record.body,
        record.key or "",
        encode_headers(record.headers),
        record.deliver_at_ms,
        record.attempt,
        None,
        None,
    )


def reject_row(
    entry_id: str, fields: Mapping[bytes, bytes], reason: str, *, shards: int
) -> SourceRow:
    """A reject row: spread over the reject slot's shards, original fields kept."""
    shard = zlib.crc32(entry_id.encode()) % shards
    raw = [part for name, value in fields.items() for part in (name, value)]
    return (
        REJECT,
        timing.wheel_key(timing.REJECT_SLOT_MS, shard),
        entry_id,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        reason,
        raw,
    )
