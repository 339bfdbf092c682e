from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline import ids
from delayline.errors import InvalidMessageIdError

times_ms = st.integers(min_value=0, max_value=ids.MAX_ID_TIME_MS)


@given(times_ms)
def test_id_encodes_its_delivery_time(deliver_at_ms: int) -> None:
    message_id = ids.new_message_id(deliver_at_ms)
    assert len(message_id) == ids.ID_LENGTH
    assert ids.is_message_id(message_id)
    assert ids.deliver_at_ms_of(message_id) == deliver_at_ms


@given(times_ms, times_ms)
def test_ids_sort_by_delivery_time(a_ms: int, b_ms: int) -> None:
    a, b = ids.new_message_id(a_ms), ids.new_message_id(b_ms)
    if a_ms < b_ms:
        assert a < b
    elif a_ms > b_ms:
        assert a > b


def test_ids_for_the_same_instant_are_unique() -> None:
    generated = {ids.new_message_id(1_700_000_000_000) for _ in range(10_000)}
    assert len(generated) == 10_000


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "01ARZ3NDEKTSV4RRFFQ69G5FA",  # 25 characters
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",  # 27 characters
        "81ARZ3NDEKTSV4RRFFQ69G5FAV",  # first character above 7: beyond 48 bits
        "01ARZ3NDEKTSV4RRFFQ69G5FAU",  # U is not Crockford base32
        "01arz3ndektsv4rrffq69g5fav",  # lower case is not canonical
        None,
        42,
    ],
)
def test_malformed_ids_are_refused(bad: object) -> None:
    assert not ids.is_message_id(bad)
    with pytest.raises(InvalidMessageIdError) as caught:
        ids.deliver_at_ms_of(bad)  # type: ignore[arg-type]
    assert caught.value.field == "id"


@pytest.mark.parametrize("deliver_at_ms", [-1, ids.MAX_ID_TIME_MS + 1])
def test_time_outside_48_bits_cannot_make_an_id(deliver_at_ms: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        ids.new_message_id(deliver_at_ms)


@given(st.integers(min_value=1, max_value=256), times_ms)
def test_shard_is_stable_and_in_range(shards: int, deliver_at_ms: int) -> None:
    message_id = ids.new_message_id(deliver_at_ms)
    shard = ids.shard_of(message_id, shards)
    assert 0 <= shard < shards
    assert ids.shard_of(message_id, shards) == shard


def test_a_burst_at_one_instant_spreads_over_every_shard() -> None:
    shards = 4
    burst = [ids.new_message_id(1_700_000_000_000) for _ in range(300)]
    counts = [0] * shards
    for message_id in burst:
        counts[ids.shard_of(message_id, shards)] += 1
    # 300 ids over 4 shards: every shard gets a real share (expected 75 each).
    assert min(counts) >= 40, counts


def test_a_huge_non_id_is_quoted_briefly() -> None:
    with pytest.raises(InvalidMessageIdError) as caught:
        ids.deliver_at_ms_of("Z" * 1_000_000)
    assert len(str(caught.value)) < 300
    assert "'ZZZZ" in str(caught.value)


def test_a_derived_id_is_the_same_for_the_same_seed_and_time_and_only_then() -> None:
    first = ids.derived_message_id(1_700_000_000_000, b"reports\0daily\0v1")
    assert first == ids.derived_message_id(1_700_000_000_000, b"reports\0daily\0v1")
    assert ids.is_message_id(first)
    assert ids.deliver_at_ms_of(first) == 1_700_000_000_000
    assert first != ids.derived_message_id(1_700_000_000_000, b"reports\0daily\0v2")
    assert first != ids.derived_message_id(1_700_000_000_001, b"reports\0daily\0v1")
    with pytest.raises(ValueError, match="out of range"):
        ids.derived_message_id(-1, b"x")
