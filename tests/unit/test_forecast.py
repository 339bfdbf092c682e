"""The forecast's pure arithmetic: minutes into buckets, cancels of unknown topic."""

from __future__ import annotations

import pytest

from delayline.errors import ValidationError
from delayline.forecast import MinuteCounts, build_forecast, hot_candidates, minute_window


def test_a_cancel_of_unknown_topic_counts_in_the_total_not_in_its_topic() -> None:
    minute = MinuteCounts.from_fields({"t:a": "3", "t:b": "1", "u": "1"})
    assert (minute.count(None), minute.count("a"), minute.count("zzz")) == (3, 3, 0)


def test_counts_never_show_below_zero() -> None:
    # A cancel of a message that was never sent subtracts one that nothing adds back.
    minute = MinuteCounts.from_fields({"t:a": "0", "u": "1"})
    assert minute.count(None) == 0
    assert build_forecast({7: minute}, {}, by="minute").buckets == []


def test_minutes_group_into_utc_hours_and_days() -> None:
    minutes = {m: MinuteCounts({"a": 1}) for m in (0, 59, 60, 1439, 1440)}
    by_hour = build_forecast(minutes, {}, by="hour")
    assert [(b.start_ms, b.count) for b in by_hour.buckets] == [
        (0, 2),
        (3_600_000, 1),
        (82_800_000, 1),
        (86_400_000, 1),
    ]
    by_day = build_forecast(minutes, {}, by="day")
    assert [(b.start_ms, b.count) for b in by_day.buckets] == [(0, 4), (86_400_000, 1)]


def test_the_window_is_rounded_out_to_whole_minutes() -> None:
    assert minute_window(None, None) == (None, None)
    assert minute_window(60_001, 120_001) == (1, 2)
    assert minute_window(60_000, 120_000) == (1, 1)
    with pytest.raises(ValidationError):
        minute_window(5, 5)


def test_a_cancel_of_an_id_never_sent_does_not_hide_a_hot_second() -> None:
    # Three due in one second; five cancels of unknown ids elsewhere in the minute.
    minute = MinuteCounts.from_fields({"t:a": "3", "u": "5"})
    assert minute.count(None) == 0
    assert list(hot_candidates({7: minute}, hot_over=2)) == [7]
    forecast = build_forecast({7: minute}, {7: {10: 3, 11: -5}}, by="minute", hot_over=2)
    assert [(h.at_ms, h.count) for h in forecast.hot] == [(7 * 60_000 + 10_000, 3)]
