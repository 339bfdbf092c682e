from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.processor import plan_firing
from delayline.scheduler.pipeline.records import (
    MAX_REASON_BYTES,
    MAX_REJECT_BYTES,
    MAX_REJECT_FIELDS,
    reject,
)

text = st.text(max_size=40)
records = st.builds(
    packs.Record,
    kind=st.sampled_from([packs.SEND, packs.CANCEL, packs.REJECT, packs.DELIVER, packs.DROP]),
    deliver_at_ms=st.integers(min_value=0, max_value=2**48),
    id=text,
    inbound_id=text,
    topic=text,
    body=st.binary(max_size=300),
    key=text,
    headers=text,
    attempt=st.integers(min_value=1, max_value=2**31 - 1),
    reason=text,
)


@given(st.lists(records, max_size=20))
def test_packs_round_trip(items: list[packs.Record]) -> None:
    data = packs.pack(items)
    assert list(packs.unpack(data)) == items
    scanned = list(packs.scan(data))
    assert [(s.kind, s.deliver_at_ms, s.id) for s in scanned] == [
        (r.kind, r.deliver_at_ms, r.id) for r in items
    ]
    assert b"".join(s.raw for s in scanned) == data


@given(records)
def test_relabelling_changes_only_the_kind(record: packs.Record) -> None:
    [scanned] = packs.scan(packs.encode(record))
    assert list(packs.unpack(scanned.relabelled(packs.DROP))) == [record._replace(kind=packs.DROP)]


@given(st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=50)), max_size=10))
def test_field_pairs_round_trip(pairs: list[tuple[bytes, bytes]]) -> None:
    assert packs.decode_fields(packs.encode_fields(pairs)) == pairs


def message(message_id: str, due_ms: int) -> packs.Record:
    return packs.Record(packs.SEND, due_ms, message_id, f"1-{message_id}")


def cancel(message_id: str, due_ms: int) -> packs.Record:
    return packs.Record(packs.CANCEL, due_ms, message_id, f"2-{message_id}")


def test_a_firing_emits_what_is_due_within_the_lead_and_keeps_the_rest() -> None:
    data = packs.pack(
        [message("a", 1_000), message("b", 1_400), message("c", 1_401), message("d", 1_900)]
    )
    plan = plan_firing(data, now_ms=1_100, ahead_ms=300, cancels_until_ms=10_000)
    assert [(r.kind, r.id) for r in packs.unpack(plan.out)] == [
        (packs.DELIVER, "a"),
        (packs.DELIVER, "b"),
    ]
    assert [r.id for r in packs.unpack(plan.keep)] == ["c", "d"]
    assert plan.next_fire_ms == 1_401 - 300


def test_cancelled_messages_are_dropped_and_cancels_kept_until_their_expiry() -> None:
    data = packs.pack([cancel("a", 1_000), message("a", 1_000), message("b", 1_000)])
    plan = plan_firing(data, now_ms=1_000, ahead_ms=0, cancels_until_ms=5_000)
    assert [(r.kind, r.id) for r in packs.unpack(plan.out)] == [
        (packs.DROP, "a"),
        (packs.DELIVER, "b"),
    ]
    assert [(r.kind, r.id) for r in packs.unpack(plan.keep)] == [(packs.CANCEL, "a")]
    assert plan.next_fire_ms == 5_000  # wake up to forget the cancel
    expired = plan_firing(plan.keep, now_ms=5_000, ahead_ms=0, cancels_until_ms=5_000)
    assert (expired.out, expired.keep, expired.next_fire_ms) == (b"", b"", None)


def test_a_field_too_long_for_its_length_is_named() -> None:
    record = packs.Record(packs.REJECT, 0, "", "1-0", reason="r" * 70_000)
    with pytest.raises(ValueError, match="reason is 70000 bytes, more than 65535"):
        packs.encode(record)


def test_a_number_out_of_range_is_named() -> None:
    record = packs.Record(packs.SEND, 0, "A", "1-0", attempt=2**31)
    with pytest.raises(ValueError, match="attempt=2147483648"):
        packs.encode(record)


def test_the_largest_reject_fits_a_pack() -> None:
    # A reject's reason and kept fields stay within what their lengths can say.
    assert MAX_REASON_BYTES <= packs.MAX_SHORT_BYTES
    value = bytes(2 * 1024 * 1024)
    fields = {str(n).encode() * 300: value for n in range(1_200)}
    _, data = reject("1-0", fields, "é" * 70_000, shards=1)
    [record] = packs.unpack(data)
    assert len(record.reason.encode()) <= MAX_REASON_BYTES
    # Each kept pair costs 8 bytes of lengths; "truncated" comes last.
    assert len(record.body) <= MAX_REJECT_BYTES + 8 * (MAX_REJECT_FIELDS + 1) + 32
