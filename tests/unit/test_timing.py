from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline import timing
from delayline.errors import ValidationError


def test_levels_are_rocketmqs_eighteen() -> None:
    expected_s = [
        1,
        5,
        10,
        30,
        60,
        120,
        180,
        240,
        300,
        360,
        420,
        480,
        540,
        600,
        1200,
        1800,
        3600,
        7200,
    ]
    assert [level_ms // 1000 for level_ms in timing.LEVELS_MS] == expected_s
    assert timing.level_delay_ms(1) == 1_000
    assert timing.level_delay_ms(5) == 60_000
    assert timing.level_delay_ms(18) == 7_200_000


@pytest.mark.parametrize("level", [0, 19, -1, 1.5, "3", True, None])
def test_levels_outside_1_to_18_are_refused_not_clamped(level: object) -> None:
    with pytest.raises(ValidationError) as caught:
        timing.level_delay_ms(level)  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.rule) == ("level", "range")


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("250ms", 250),
        ("90s", 90_000),
        ("30m", 1_800_000),
        ("2h", 7_200_000),
        ("15d", 1_296_000_000),
        ("1h30m", 5_400_000),
        (" 1h 30m ", 5_400_000),
        ("0s", 0),
    ],
)
def test_parse_duration(text: str, expected_ms: int) -> None:
    assert timing.parse_duration_ms(text) == expected_ms


@pytest.mark.parametrize(
    "text", ["", "30", "m", "1x", "-5s", "1.5h", "30m-", "h1", "\u0663s", "9" * 5_000 + "d"]
)
def test_parse_duration_refuses_garbage(text: str) -> None:
    with pytest.raises(ValidationError, match="not a duration"):
        timing.parse_duration_ms(text)


def test_a_refused_duration_names_the_field_it_was_given_for() -> None:
    with pytest.raises(ValidationError) as caught:
        timing.parse_duration_ms("a while")
    assert (caught.value.field, caught.value.rule) == ("delay", "duration")
    with pytest.raises(ValidationError) as caught:
        timing.parse_duration_ms("a while", "catch_up_window")
    assert (caught.value.field, caught.value.rule) == ("catch_up_window", "duration")


def test_aware_datetimes_convert_to_epoch_ms_and_back() -> None:
    moment = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert timing.to_epoch_ms(moment) == 1_796_115_600_000
    shifted = moment.astimezone(timezone(timedelta(hours=8)))
    assert timing.to_epoch_ms(shifted) == 1_796_115_600_000
    assert timing.from_epoch_ms(1_796_115_600_000) == moment


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        timing.to_epoch_ms(datetime(2026, 12, 1, 9, 0))


@given(st.integers(min_value=0, max_value=2**47), st.integers(min_value=1, max_value=60_000))
def test_a_message_falls_in_the_slot_that_contains_it(deliver_at_ms: int, tick_ms: int) -> None:
    slot_ms = timing.slot_start_ms(deliver_at_ms, tick_ms)
    assert slot_ms <= deliver_at_ms < slot_ms + tick_ms
    assert slot_ms % tick_ms == 0


@given(
    st.integers(min_value=timing.REJECT_SLOT_MS, max_value=2**47),
    st.integers(min_value=0, max_value=timing.MAX_SHARDS - 1),
    st.booleans(),
)
def test_wheel_key_round_trips(slot_ms: int, shard: int, coarse: bool) -> None:
    key = timing.wheel_key(slot_ms, shard, coarse)
    assert timing.split_wheel_key(key) == (slot_ms, shard, coarse)


def test_place_puts_far_messages_in_coarse_slots() -> None:
    wheel = timing.Wheel()
    assert wheel.place(1_000_000 + 300_000, 1_000_000) == (1_300_000 - 1_300_000 % 500, False)
    assert wheel.place(1_000_000 + 300_001, 1_000_000) == (1_260_000, True)
    assert wheel.place(500, 10_000) == (500, False)  # past due: fine


def test_a_wheel_must_hand_down_into_fine_slots() -> None:
    with pytest.raises(ValueError, match="coarse_tick_ms"):
        timing.Wheel(coarse_tick_ms=60_000, coarse_after_ms=100_000, cascade_ahead_ms=50_000)
