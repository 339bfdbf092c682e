from __future__ import annotations

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.scheduler import packs
from delayline.scheduler.records import to_packed
from delayline.validation import Limits

NOW_MS = 1_800_000_000_000
WHEEL = timing.Wheel(tick_ms=100)


def placements(entry_id: str, fields: dict[bytes, bytes]) -> list[tuple[int, packs.Record]]:
    placed = to_packed(entry_id, fields, limits=Limits(), wheel=WHEEL, shards=4)
    return [(key, record) for key, data in placed for record in packs.unpack(data)]


def record_of(entry_id: str, fields: dict[bytes, bytes]) -> tuple[int, packs.Record]:
    [placed] = placements(entry_id, fields)
    return placed


def test_a_send_is_keyed_by_slot_and_shard() -> None:
    message = Message.create(
        "t", b"body", now_ms=NOW_MS, limits=Limits(), delay=1234, key="k", headers={"h": "v"}
    )
    key, record = record_of(f"{NOW_MS}-0", message.to_record())
    assert timing.split_wheel_key(key) == (
        timing.slot_start_ms(NOW_MS + 1234, 100),
        ids.shard_of(message.id, 4),
        False,
    )
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


def test_a_far_message_starts_in_a_coarse_slot() -> None:
    delay_ms = WHEEL.coarse_after_ms + 1
    message = Message.create("t", b"x", now_ms=NOW_MS, limits=Limits(), delay=delay_ms)
    key, _ = record_of(f"{NOW_MS}-0", message.to_record())
    assert timing.split_wheel_key(key) == (
        timing.slot_start_ms(NOW_MS + delay_ms, WHEEL.coarse_tick_ms),
        ids.shard_of(message.id, 4),
        True,
    )
    # Handed down later, the same message is near: it lands in a fine slot.
    later_ms = NOW_MS + delay_ms - WHEEL.cascade_lead_ms
    handed_down = message.to_record() | {b"cascade": b"1"}
    fine_key, _ = record_of(f"{later_ms}-0", handed_down)
    assert timing.split_wheel_key(fine_key)[2] is False


def test_a_cancel_goes_to_both_levels_of_its_message() -> None:
    near = Message.create("t", b"body", now_ms=NOW_MS, limits=Limits(), delay=9_999)
    far = Message.create("t", b"body", now_ms=NOW_MS, limits=Limits(), delay=10**7)
    for message in (near, far):
        send_key, _ = record_of(f"{NOW_MS}-0", message.to_record())
        cancels = placements(f"{NOW_MS}-1", Cancel(message.id, NOW_MS).to_record())
        assert send_key in [key for key, _ in cancels]
        assert sorted(timing.split_wheel_key(key)[2] for key, _ in cancels) == [False, True]
        for _, cancel in cancels:
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
