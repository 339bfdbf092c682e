from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.scheduler.pipeline import packs, records
from delayline.scheduler.pipeline.records import (
    MAX_REASON_BYTES,
    MAX_REJECT_BYTES,
    MAX_REJECT_FIELDS,
    MAX_REJECT_NAME_BYTES,
    MAX_REJECT_VALUE_BYTES,
    TRUNCATION_MARK,
    bounded_reason,
    kept_fields,
    reject,
    to_packed,
)
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
    later_ms = NOW_MS + delay_ms - WHEEL.cascade_ahead_ms
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


# -- rejects of any size: nothing raises, everything fits ------------------------------------

GOOD = Message.create("t", b"x", now_ms=NOW_MS, limits=Limits(), delay=1_000)
HUGE = 70_000


def rejected(fields: dict[bytes, bytes]) -> tuple[packs.Record, dict[bytes, bytes]]:
    """The reject ``fields`` become, and the fields it keeps."""
    key, record = record_of(f"{NOW_MS}-7", fields)
    assert timing.split_wheel_key(key)[0] == timing.REJECT_SLOT_MS
    assert record.kind == packs.REJECT
    assert record.reason
    assert len(record.reason.encode()) <= MAX_REASON_BYTES
    return record, dict(packs.decode_fields(record.body))


@pytest.mark.parametrize(
    "name", [b"v", b"op", b"id", b"topic", b"key", b"headers", b"deliver_at_ms", b"attempt"]
)
def test_a_70000_character_field_is_rejected_and_kept_whole(name: bytes) -> None:
    fields = GOOD.to_record() | {name: b"x" * HUGE}
    record, kept = rejected(fields)
    assert kept == fields  # under the 1 MiB cap: nothing is cut
    assert record.id == ("" if name in (b"op", b"id") else GOOD.id)


def test_the_issue_8_record_is_rejected_with_the_topic_quoted_briefly() -> None:
    fields = {
        b"v": b"1",
        b"op": b"send",
        b"id": GOOD.id.encode(),
        b"topic": b"a" * HUGE,
        b"body": b"x",
        b"deliver_at_ms": str(GOOD.deliver_at_ms).encode(),
    }
    record, kept = rejected(fields)
    assert record.reason.startswith("topic must be 1-249 characters")
    assert record.reason.endswith("…")
    assert len(record.reason) < 200
    assert kept[b"topic"] == b"a" * HUGE


@pytest.mark.parametrize("name", [b"deliver_at_ms", b"attempt", b"sent_at_ms"])
def test_an_integer_of_70000_digits_is_rejected(name: bytes) -> None:
    # int() refuses more than 4,300 digits with a ValueError of its own.
    record, _ = rejected(GOOD.to_record() | {name: b"9" * HUGE})
    assert "at most 19 digits" in record.reason


def test_an_attempt_beyond_32_bits_is_rejected() -> None:
    record, _ = rejected(GOOD.to_record() | {b"attempt": str(2**31).encode()})
    assert "attempt must be an integer from 1 to 2147483647" in record.reason
    _, accepted = record_of(f"{NOW_MS}-0", GOOD.to_record() | {b"attempt": str(2**31 - 1).encode()})
    assert (accepted.kind, accepted.attempt) == (packs.SEND, 2**31 - 1)


def test_a_70000_character_unknown_field_is_ignored_by_a_send_and_cut_in_a_reject() -> None:
    long_name = b"n" * HUGE
    _, accepted = record_of(f"{NOW_MS}-0", GOOD.to_record() | {long_name: b"v" * HUGE})
    assert accepted.kind == packs.SEND
    _, kept = rejected(GOOD.to_record() | {long_name: b"v" * HUGE, b"op": b"explode"})
    cut_name = b"n" * MAX_REJECT_NAME_BYTES + TRUNCATION_MARK % HUGE
    assert kept[cut_name] == b"v" * HUGE
    assert kept[b"truncated"] == b"1"


def test_a_2_mib_body_keeps_its_first_mib_and_a_mark() -> None:
    body = bytes(range(256)) * (8 * 1024)  # 2 MiB
    record, kept = rejected(GOOD.to_record() | {b"body": body})
    assert "more than the limit of 1048576" in record.reason
    assert kept[b"body"] == body[:MAX_REJECT_VALUE_BYTES] + b"...[truncated from 2097152 bytes]"
    assert kept[b"truncated"] == b"1"
    assert kept[b"topic"] == b"t"  # the other fields stay whole


def test_thousands_of_fields_keep_the_first_thousand() -> None:
    fields = {f"f{n}".encode(): b"v" for n in range(5_000)}
    record, kept = rejected(fields)
    assert record.reason == "missing field 'v' (record format version)"
    assert len(kept) == MAX_REJECT_FIELDS + 1
    assert list(kept)[:MAX_REJECT_FIELDS] == list(fields)[:MAX_REJECT_FIELDS]
    assert kept[b"truncated"] == b"4000"


def test_binary_junk_names_and_values_are_kept_as_they_are() -> None:
    fields = {bytes([n, 255 - n, 0]): bytes(range(n, 256)) for n in range(256)}
    _, kept = rejected(fields)
    assert kept == fields


def test_many_huge_fields_stay_within_the_total_cap() -> None:
    fields = {f"big{n}".encode(): bytes([n]) * (3 * 1024 * 1024) for n in range(6)}
    fields |= {b"v": b"1", b"op": b"send"}
    kept = kept_fields(fields)
    size = sum(len(name) + len(value) for name, value in kept if name != b"truncated")
    assert size <= MAX_REJECT_BYTES
    assert [name for name, _ in kept[:3]] == [b"big0", b"big1", b"big2"]
    three_mib = len(fields[b"big0"])
    assert kept[0] == (b"big0", bytes(MAX_REJECT_VALUE_BYTES) + TRUNCATION_MARK % three_mib)
    assert kept[-1] == (b"truncated", str(len(fields) - 2).encode())
    assert (b"v", b"1") in kept  # small fields after the cut ones still fit


def test_fields_named_like_the_reject_fields_are_renamed() -> None:
    fields = {
        b"v": b"1",
        b"reason": b"mine",
        b"truncated": b"no",
        b"inbound_id": b"x",
        b"body": b"\x00\xff",
    }
    _, kept = rejected(fields)
    assert list(kept.items()) == [
        (b"v", b"1"),
        (b"original.reason", b"mine"),
        (b"original.truncated", b"no"),
        (b"original.inbound_id", b"x"),
        (b"body", b"\x00\xff"),
    ]


def test_an_unexpected_error_becomes_a_reject(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(records, "decode_record", explode)
    record, kept = rejected(GOOD.to_record())
    assert record.reason == "cannot read the record: KeyError: 'boom'"
    assert kept == GOOD.to_record()


def test_a_send_that_does_not_fit_a_pack_becomes_a_reject(monkeypatch: pytest.MonkeyPatch) -> None:
    # Validation keeps every accepted field within its pack length; were it not to,
    # the pack's own error becomes the reason.
    unchecked = GOOD._replace(topic="t" * HUGE)
    monkeypatch.setattr(records, "decode_record", lambda *args, **kwargs: unchecked)
    record, _ = rejected(GOOD.to_record())
    assert record.reason.startswith("cannot read the record: ValueError: record does not fit")
    assert "topic is 70000 bytes" in record.reason


def test_reasons_are_bounded_utf8() -> None:
    assert bounded_reason("short") == "short"
    long = bounded_reason("é" * HUGE)
    assert long.endswith("…")
    assert len(long.encode()) <= MAX_REASON_BYTES
    assert bounded_reason("\udcff") == "\\udcff"  # a lone surrogate cannot be UTF-8


def test_reject_itself_takes_any_reason_and_claimed_id() -> None:
    fields = {b"op": b"send", b"id": b"\xff" * ids.ID_LENGTH, b"v": b"1"}
    key, data = reject(f"{NOW_MS}-0", fields, "\udcff" + "x" * HUGE, shards=4)
    [record] = packs.unpack(data)
    assert (record.id, len(record.reason.encode())) == ("", MAX_REASON_BYTES)
    assert timing.split_wheel_key(key)[0] == timing.REJECT_SLOT_MS


known = st.sampled_from([b"v", b"op", b"id", b"topic", b"body", b"deliver_at_ms", b"attempt"])
values = (
    st.binary(max_size=40)
    | st.sampled_from([b"1", b"send", b"cancel", b"t", b"-1", b"0", b"{}", b"9" * 30])
    | st.just(GOOD.id.encode())
    | st.integers(min_value=0, max_value=HUGE).map(lambda n: b"z" * n)
)


@given(st.dictionaries(known | st.binary(max_size=30), values, min_size=1, max_size=12))
def test_no_record_makes_to_packed_raise(fields: dict[bytes, bytes]) -> None:
    for _, data in to_packed(f"{NOW_MS}-0", fields, limits=Limits(), wheel=WHEEL, shards=4):
        for record in packs.unpack(data):
            if record.kind == packs.REJECT:
                assert 0 < len(record.reason.encode()) <= MAX_REASON_BYTES
                assert len(packs.decode_fields(record.body)) <= MAX_REJECT_FIELDS + 1
            else:
                assert record.kind in (packs.SEND, packs.CANCEL)
