"""The delivery history's pure parts: a minute from its hash, its percentiles and JSON,
and the window a read covers."""

from __future__ import annotations

import pytest

from delayline.errors import ValidationError
from delayline.history import MAX_MINUTES, MINUTE_MS, HistoryMinute, build, check_minutes, window

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # on a whole minute


def test_a_minute_reads_its_counts_and_its_lateness_histogram() -> None:
    fields = {"delivered": 100, "dropped": 2, "rejected": 1, "l:1": 90, "l:50": 9, "l:+Inf": 1}
    minute = HistoryMinute.from_fields(T0, {**fields, "l:sum": 70_950})
    assert (minute.delivered, minute.dropped, minute.rejected) == (100, 2, 1)
    assert minute.lateness_ms(0.5) == 1
    assert minute.lateness_ms(0.95) == 50
    assert minute.lateness_ms(0.999) == float("inf")
    shown = minute.to_json()
    assert shown["minute"] == "2027-01-15T08:00:00.000Z"
    assert (shown["lateness_p50_ms"], shown["lateness_p99_ms"]) == (1, 50)
    assert shown["lateness_mean_ms"] == 709.5
    assert (
        HistoryMinute.from_fields(T0, {"delivered": 1, "l:+Inf": 1}).to_json()["lateness_p99_ms"]
        == "+Inf"
    )


def test_an_empty_minute_has_no_lateness() -> None:
    shown = HistoryMinute.from_fields(T0, {}).to_json()
    assert shown["delivered"] == 0
    assert (shown["lateness_p50_ms"], shown["lateness_mean_ms"]) == (None, None)


def test_the_window_ends_with_the_current_minute_oldest_first() -> None:
    assert window(3, T0 + 59_999) == [T0 - 2 * MINUTE_MS, T0 - MINUTE_MS, T0]
    history = build(window(2, T0), [{"delivered": 3}, {"delivered": 4}])
    assert (history.from_ms, history.to_ms, history.delivered) == (
        T0 - MINUTE_MS,
        T0 + MINUTE_MS,
        7,
    )
    assert [m["delivered"] for m in history.to_json()["minutes"]] == [3, 4]  # type: ignore[index]


@pytest.mark.parametrize("minutes", [0, -1, MAX_MINUTES + 1, True, 1.5])
def test_a_length_outside_the_kept_history_is_refused(minutes: object) -> None:
    with pytest.raises(ValidationError, match=f"minutes must be from 1 to {MAX_MINUTES}"):
        check_minutes(minutes)  # type: ignore[arg-type]
