from __future__ import annotations

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.scheduler import schemas
from delayline.scheduler.records import to_source_row
from delayline.validation import Limits

NOW_MS = 1_800_000_000_000
COLUMNS = schemas.SOURCE.fieldNames()


def row_of(entry_id: str, fields: dict[bytes, bytes]) -> dict[str, object]:
    row = to_source_row(entry_id, fields, limits=Limits(), tick_ms=100, shards=4)
    assert len(row) == len(COLUMNS)
    return dict(zip(COLUMNS, row, strict=True))


def test_a_send_is_keyed_by_slot_and_shard() -> None:
    message = Message.create("t", b"body", now_ms=NOW_MS, limits=Limits(), delay=1234)
    row = row_of(f"{NOW_MS}-0", message.to_record())
    slot_ms, shard = timing.split_wheel_key(row["wheel_key"])  # type: ignore[arg-type]
    assert row["kind"] == schemas.SEND
    assert slot_ms == timing.slot_start_ms(NOW_MS + 1234, 100)
    assert shard == ids.shard_of(message.id, 4)
    assert (row["id"], row["topic"], row["body"], row["key"], row["headers"]) == (
        message.id,
        "t",
        b"body",
        "",
        "{}",
    )
    assert (row["deliver_at_ms"], row["attempt"], row["inbound_id"]) == (
        NOW_MS + 1234,
        1,
        f"{NOW_MS}-0",
    )


def test_a_cancel_goes_to_the_same_key_as_its_message() -> None:
    message = Message.create("t", b"body", now_ms=NOW_MS, limits=Limits(), delay=9_999)
    send = row_of(f"{NOW_MS}-0", message.to_record())
    cancel = row_of(f"{NOW_MS}-1", Cancel(message.id, NOW_MS).to_record())
    assert cancel["kind"] == schemas.CANCEL
    assert cancel["wheel_key"] == send["wheel_key"]
    assert cancel["id"] == message.id


def test_a_bad_record_becomes_a_reject_with_its_fields_and_reason() -> None:
    fields = {b"v": b"1", b"op": b"explode", b"id": ids.new_message_id(NOW_MS).encode()}
    row = row_of(f"{NOW_MS}-3", fields)
    assert row["kind"] == schemas.REJECT
    slot_ms, _ = timing.split_wheel_key(row["wheel_key"])  # type: ignore[arg-type]
    assert slot_ms == timing.REJECT_SLOT_MS
    assert "unknown op 'explode'" in str(row["reason"])
    raw = row["raw"]
    assert isinstance(raw, list)
    assert dict(zip(raw[0::2], raw[1::2], strict=True)) == fields


def test_max_delay_uses_the_entry_time_so_replays_agree() -> None:
    message = Message.create("t", b"x", now_ms=NOW_MS, limits=Limits(), delay=Limits().max_delay_ms)
    assert row_of(f"{NOW_MS}-0", message.to_record())["kind"] == schemas.SEND
    assert row_of(f"{NOW_MS - 1}-0", message.to_record())["kind"] == schemas.REJECT
