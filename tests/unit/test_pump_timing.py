"""The pump's timing from its script's replies: how long until the next due entry, to
the µs of Redis's clock, and how many calls a herd due at once gets in one round trip."""

from __future__ import annotations

import pytest

from delayline.redis.scripts import pump_result
from delayline.scheduler.pump import MAX_HERD_CALLS, PUMP_BATCH, herd_calls


def test_the_wait_counts_the_microseconds_past_redis_ms() -> None:
    # Redis's clock at 1,000.750 ms, the next entry due at 1,200: 199.25 ms to wait,
    # not the 200 that whole ms give (a wake-up most of a ms late).
    result = pump_result([[3, "1000", "1200", 0, 750, 40]])
    assert result.due_in_ms == pytest.approx(199.25)
    assert (result.moved, result.next_due_ms, result.due_by_next) == (3, 1200, 40)


def test_a_held_entry_is_due_at_the_next_whole_ms() -> None:
    # A score with a fraction is held by a delivery limit until the ms after it.
    result = pump_result([[0, "1000", "1199.5", 0, 0, 1]])
    assert (result.next_due_ms, result.due_in_ms) == (1200, 200.0)


def test_calls_made_in_one_round_trip_add_their_moves_and_tell_the_last_state() -> None:
    result = pump_result([[515, "1000", "1000", 0, 100, 515], [515, "1003", "-1", 2, 900, 0]])
    assert (result.moved, result.now_ms, result.ready) == (1030, 1003, 2)
    assert (result.next_due_ms, result.due_in_ms, result.due_by_next) == (None, None, 0)


@pytest.mark.parametrize(
    ("due", "calls"),
    [
        (0, 1),
        (1, 1),
        (PUMP_BATCH, 1),
        (PUMP_BATCH + 1, 2),
        (1_030, 2),
        (2 * PUMP_BATCH, 2),
        (2 * PUMP_BATCH + 1, MAX_HERD_CALLS),
        (100 * PUMP_BATCH, MAX_HERD_CALLS),
    ],
)
def test_a_herd_gets_the_calls_it_needs_up_to_a_bound(due: int, calls: int) -> None:
    assert herd_calls(due) == calls
