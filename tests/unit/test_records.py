from __future__ import annotations

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.scheduler import packs
from delayline.scheduler.records import to_packed
from delayline.validation import Limits

NOW_MS = 1_800_000_000_000


def record_of(entry_id: str, fields: dict[bytes, bytes]) -> tuple[int, packs.Record]:
    key, data = to_packed(entry_id, fields, limits=Limits(), tick_ms=100, shards=4)
    [record] = packs.unpack(data)
    return key, record


def test_a_send_is_keyed_by_slot_and_shard() -> None:
    message = Message.create(
        "t", b"body", now_ms=NOW_MS, limits=Limits(), delay=1234, key="k", headers={"h": "v"}
    )
    key, record = record_of(f"{NOW_MS}-0", message.to_record())
    slot_ms, shard = timing.split_wheel_key(key)
    assert slot_ms == timing.slot_start_ms(NOW_MS + 1234, 100)
    assert shard == ids.shard_of(message.id, 4)
    assert record == packs.Record(
        kind=packs.SEND,
        deliver_at_ms=NOW_MS + 1234,
        id=message.id,
        inbound_id=f"{NOW_MS}-0",
        topic="t",
        body=b"body",
        key="k",
        headers='{"h":"v"}',
        attempt=1,
    )


def test_a_send_without_key_or_headers() -> None:
    message = Message.create("t", b"", now_ms=NOW_MS, limits=Limits())
    _, record = record_of(f"{NOW_MS}-0", message.to_record())
    assert (record.key, record.headers) == ("", "{}")


def test_a_cancel_goes_to_the_same_key_as_its_message() -> None:
    message = Message.create("t", b"body", now_ms=NOW_MS, limits=Limits(), delay=9_999)
    send_key, _ = record_of(f"{NOW_MS}-0", message.to_record())
    cancel_key, cancel = record_of(f"{NOW_MS}-1", Cancel(message.id, NOW_MS).to_record())
    assert cancel_key == send_key
    assert (cancel.kind, cancel.id, cancel.deliver_at_ms) == (
        packs.CANCEL,
        message.id,
        message.deliver_at_ms,
    )


def test_a_bad_record_becomes_a_reject_with_its_fields_and_reason() -> None:
    fields = {b"v": b"1", b"op": b"explode", b"id": ids.new_message_id(NOW_MS).encode()}
    key, record = record_of(f"{NOW_MS}-3", fields)
    assert timing.split_wheel_key(key)[0] == timing.REJECT_SLOT_MS
    assert record.kind == packs.REJECT
    assert "unknown op 'explode'" in record.reason
    assert dict(packs.decode_fields(record.body)) == fields
    assert record.id == ""  # not a send: says nothing about the id


def test_a_rejected_send_keeps_its_claimed_id() -> None:
    message = Message.create("t", b"x", now_ms=NOW_MS, limits=Limits())
    _, record = record_of(f"{NOW_MS}-0", message.to_record() | {b"topic": b"bad topic"})
    assert (record.kind, record.id) == (packs.REJECT, message.id)


def test_max_delay_uses_the_entry_time_so_replays_agree() -> None:
    message = Message.create("t", b"x", now_ms=NOW_MS, limits=Limits(), delay=Limits().max_delay_ms)
    assert record_of(f"{NOW_MS}-0", message.to_record())[1].kind == packs.SEND
    assert record_of(f"{NOW_MS - 1}-0", message.to_record())[1].kind == packs.REJECT
