"""The one parser for times given as text: strict RFC 3339, epoch ms, and durations
from now where the caller allows them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.errors import ValidationError
from delayline.moments import parse_moment_ms
from delayline.timing import LAST_MS, format_time

#: 2026-12-01T09:00:00Z
NINE_MS = 1_796_115_600_000
NOW_MS = 1_800_000_000_000


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("2026-12-01T09:00:00Z", NINE_MS),
        ("2026-12-01T17:00:00+08:00", NINE_MS),
        ("2026-12-01T14:30:00+05:30", NINE_MS),
        ("2026-12-01T03:15:00-05:45", NINE_MS),
        ("2026-12-01T09:00:00-00:00", NINE_MS),  # RFC 3339: UTC, local offset unknown
        ("2026-12-01t09:00:00z", NINE_MS),  # the RFC allows lower case
        ("2026-12-01 09:00:00Z", NINE_MS),  # and a space for readability
        (" 2026-12-01T09:00:00Z\n", NINE_MS),
        ("2026-12-01T09:00:00.250Z", NINE_MS + 250),
        ("2026-12-01T09:00:00.2Z", NINE_MS + 200),
        ("2026-12-01T09:00:00.000Z", NINE_MS),
        # Finer than a millisecond rounds up: never early.
        ("2026-12-01T09:00:00.0001Z", NINE_MS + 1),
        ("2026-12-01T09:00:00.250000000Z", NINE_MS + 250),
        ("2026-12-01T09:00:00.999999Z", NINE_MS + 1_000),
        ("2026-12-01T09:00:00." + "0" * 5_000 + "1Z", NINE_MS + 1),
        ("2028-02-29T00:00:00Z", 1_835_395_200_000),
        ("1796115600000", NINE_MS),
        ("0", 0),
        ("9999-12-31T23:59:59.999Z", LAST_MS),
        (str(LAST_MS), LAST_MS),
    ],
)
def test_rfc3339_and_epoch_ms(text: str, expected_ms: int) -> None:
    assert parse_moment_ms(text, "deliver_at") == expected_ms


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        # The last second of 2016 was a leap second: its end is the midnight after it.
        ("2016-12-31T23:59:60Z", 1_483_228_800_000),
        ("2016-12-31T23:59:60.500Z", 1_483_228_800_000),
        ("2016-12-31T15:59:60-08:00", 1_483_228_800_000),  # the RFC's own example's form
        ("2015-06-30T23:59:60Z", 1_435_708_800_000),
    ],
)
def test_a_leap_second_is_the_midnight_that_follows_it(text: str, expected_ms: int) -> None:
    assert parse_moment_ms(text, "deliver_at") == expected_ms


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("2026-W50-1T09:00Z", "rfc3339"),  # an ISO week date, which the API once took
        ("2026-W50-1T09:00:00Z", "rfc3339"),
        ("2026-335T09:00:00Z", "rfc3339"),  # an ordinal date
        ("2026-12-01", "rfc3339"),  # a date alone
        ("2026-12-01T09:00Z", "rfc3339"),  # no seconds
        ("2026-12-01T09Z", "rfc3339"),
        ("20261201T090000Z", "rfc3339"),  # ISO 8601's basic form
        ("2026-12-01T09:00:00+0800", "rfc3339"),
        ("2026-12-01T09:00:00+08", "rfc3339"),
        ("2026-12-01T09:00:00.Z", "rfc3339"),
        ("2026-12-01T09:00:00,5Z", "rfc3339"),
        ("2026-12-01T09:00:00", "timezone"),  # a naive time
        ("2026-12-01T09:00:00.250", "timezone"),
        ("2026-12-01 09:00:00", "timezone"),
        ("2026-12-01T09:00:60Z", "rfc3339"),  # :60 is only a month's last UTC second
        ("2016-12-30T23:59:60Z", "rfc3339"),
        ("2016-12-31T23:59:61Z", "rfc3339"),
        ("2026-02-29T09:00:00Z", "rfc3339"),  # not a leap year
        ("2026-13-01T09:00:00Z", "rfc3339"),
        ("2026-12-01T24:00:00Z", "rfc3339"),
        ("2026-12-01T09:60:00Z", "rfc3339"),
        ("2026-12-01T09:00:00+24:00", "rfc3339"),
        ("2026-12-01T09:00:00+05:60", "rfc3339"),
        ("0000-01-01T00:00:00Z", "rfc3339"),
        ("\u0662\u0660\u0662\u0666-12-01T09:00:00Z", "rfc3339"),  # Arabic-Indic digits
        ("\u00b2", "rfc3339"),  # a digit to str.isdigit, not to int()
        ("-5", "rfc3339"),
        ("1.5", "rfc3339"),
        ("2h", "rfc3339"),  # a duration, where none is taken
        ("tomorrow", "rfc3339"),
        ("", "rfc3339"),
        ("   ", "rfc3339"),
        ("9999-12-31T23:59:59-00:01", "range"),
        ("9999-12-31T23:59:60Z", "range"),
        (str(LAST_MS + 1), "range"),
        ("9" * 5_000, "range"),
    ],
)
def test_refusals_name_the_field_and_rule(text: str, rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_moment_ms(text, "at")
    assert (caught.value.field, caught.value.rule) == ("at", rule)


def test_a_refusal_shows_valid_forms() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_moment_ms("2026-W50-1T09:00Z", "deliver_at")
    assert str(caught.value) == (
        "deliver_at '2026-W50-1T09:00Z' is not RFC 3339 (2026-12-01T09:00:00Z) "
        "or epoch ms (1796115600000)"
    )
    with pytest.raises(ValidationError, match=r"add Z or \+hh:mm \(2026-12-01T09:00:00Z\)"):
        parse_moment_ms("2026-12-01T09:00:00", "deliver_at")
    with pytest.raises(ValidationError, match=r"or a duration from now \(2h\)$"):
        parse_moment_ms("soon", "from", now_ms=NOW_MS)
    with pytest.raises(ValidationError, match=r"is not a valid time; give RFC 3339"):
        parse_moment_ms("2026-02-30T09:00:00Z", "deliver_at")


def test_a_huge_value_is_quoted_short() -> None:
    with pytest.raises(ValidationError) as caught:
        parse_moment_ms("x" * 100_000, "from")
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("90s", NOW_MS + 90_000),
        ("2h", NOW_MS + 7_200_000),
        ("1h30m", NOW_MS + 5_400_000),
        ("250ms", NOW_MS + 250),
        ("0s", NOW_MS),
        # The absolute forms still work where a duration is taken.
        ("2026-12-01T09:00:00Z", NINE_MS),
        ("1796115600000", NINE_MS),
        ("30", 30),  # digits alone are epoch ms, never a duration
    ],
)
def test_a_duration_counts_from_now_where_it_is_taken(text: str, expected_ms: int) -> None:
    assert parse_moment_ms(text, "from", now_ms=NOW_MS) == expected_ms


@pytest.mark.parametrize("text", ["-2h", "2 hours", "1.5h", "9" * 5_000 + "d"])
def test_not_every_number_with_letters_is_a_duration(text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_moment_ms(text, "from", now_ms=NOW_MS)
    assert (caught.value.field, caught.value.rule) == ("from", "rfc3339")


@given(st.integers(min_value=0, max_value=LAST_MS))
def test_every_formatted_time_reads_back(epoch_ms: int) -> None:
    assert parse_moment_ms(format_time(epoch_ms), "deliver_at") == epoch_ms
    assert parse_moment_ms(str(epoch_ms), "deliver_at") == epoch_ms
