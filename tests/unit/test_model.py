from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline import ids
from delayline.errors import DecodeError, ValidationError
from delayline.model import Cancel, Message, decode_record
from delayline.validation import Limits

NOW_MS = 1_800_000_000_000
LIMITS = Limits()


def message(**overrides: object) -> Message:
    fields: dict[str, object] = {"now_ms": NOW_MS, "limits": LIMITS, "delay": 5_000}
    fields.update(overrides)
    return Message.create("orders.timeout", b"order-42", **fields)  # type: ignore[arg-type]


def decode(record: dict[bytes, bytes], received_ms: int = NOW_MS) -> Message | Cancel:
    return decode_record(record, received_ms=received_ms, limits=LIMITS)


@given(
    body=st.binary(max_size=512),
    key=st.none() | st.text(max_size=30),
    headers=st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4),
    delay_ms=st.integers(min_value=0, max_value=10**9),
    attempt=st.integers(min_value=1, max_value=100),
)
def test_send_records_round_trip(
    body: bytes, key: str | None, headers: dict[str, str], delay_ms: int, attempt: int
) -> None:
    original = Message.create(
        "t",
        body,
        now_ms=NOW_MS,
        limits=LIMITS,
        delay=delay_ms,
        key=key,
        headers=headers,
        attempt=attempt,
    )
    assert decode(original.to_record()) == original
    assert ids.deliver_at_ms_of(original.id) == NOW_MS + delay_ms


def test_cancel_records_round_trip_and_route_by_id() -> None:
    target = message()
    cancel = Cancel(target.id, NOW_MS)
    decoded = decode(cancel.to_record())
    assert decoded == cancel
    assert isinstance(decoded, Cancel)
    assert decoded.deliver_at_ms == target.deliver_at_ms


def test_record_carries_a_format_version() -> None:
    assert message().to_record()[b"v"] == b"1"
    assert Cancel(message().id, NOW_MS).to_record()[b"v"] == b"1"


def test_optional_fields_take_defaults() -> None:
    record = message().to_record()
    for name in (b"sent_at_ms", b"attempt", b"key", b"headers"):
        record.pop(name, None)
    decoded = decode(record, received_ms=NOW_MS + 7)
    assert isinstance(decoded, Message)
    assert (decoded.sent_at_ms, decoded.attempt, decoded.key, decoded.headers) == (
        NOW_MS + 7,
        1,
        None,
        {},
    )


def test_unknown_extra_fields_are_ignored() -> None:
    record = message().to_record() | {b"future_field": b"x"}
    assert isinstance(decode(record), Message)


def with_field(name: bytes, value: bytes | None) -> dict[bytes, bytes]:
    record = message().to_record()
    if value is None:
        record.pop(name)
    else:
        record[name] = value
    return record


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({}, "missing field 'v'"),
        (with_field(b"v", b"2"), "unsupported record version '2'"),
        (with_field(b"op", b"reminder"), "unknown op 'reminder'"),
        (with_field(b"op", None), "unknown op"),
        (with_field(b"id", None), "missing field 'id'"),
        (with_field(b"deliver_at_ms", b"soon"), "'deliver_at_ms' must be a decimal integer"),
        (with_field(b"deliver_at_ms", None), "missing field 'deliver_at_ms'"),
        (with_field(b"body", None), "missing field 'body'"),
        (with_field(b"topic", b"\xff\xfe"), "'topic' is not UTF-8"),
        (with_field(b"attempt", b"1.5"), "'attempt' must be a decimal integer"),
    ],
)
def test_malformed_records_raise_decode_errors(record: dict[bytes, bytes], reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        decode(record)


@pytest.mark.parametrize(
    ("record", "rule"),
    [
        (with_field(b"id", b"not-an-id"), "format"),
        (with_field(b"topic", b"bad topic"), "pattern"),
        (with_field(b"headers", b"[1]"), "type"),
        (with_field(b"headers", b"{oops"), "json"),
        (with_field(b"attempt", b"0"), "range"),
        (with_field(b"body", b"x" * (1024 * 1024 + 1)), "max_bytes"),
    ],
)
def test_invalid_records_raise_validation_errors(record: dict[bytes, bytes], rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        decode(record)
    assert caught.value.rule == rule


def test_id_must_encode_deliver_at_ms() -> None:
    record = with_field(b"deliver_at_ms", str(NOW_MS + 1).encode())
    with pytest.raises(ValidationError, match="does not encode deliver_at_ms"):
        decode(record)


def test_max_delay_is_measured_from_when_the_store_received_the_record() -> None:
    far = message(delay=LIMITS.max_delay_ms)
    assert isinstance(decode(far.to_record(), received_ms=NOW_MS), Message)
    with pytest.raises(ValidationError) as caught:
        decode(far.to_record(), received_ms=NOW_MS - 1)
    assert caught.value.rule == "max_delay"
