"""When a recurring schedule's runs fall: the daylight saving rules on exact instants,
croniter's own answers away from clock changes, and an oracle that walks the clock
minute by minute (or second by second) across them."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from delayline.errors import ValidationError
from delayline.schedules.recurrence import (
    MAX_TIMES,
    MIN_PERIOD_MS,
    Cron,
    Every,
    Recurrence,
    Times,
    _change_between,
    _instants_of,
    _wall_ms,
    parse_cron,
    parse_every,
    parse_times,
    runs_between,
)
from delayline.timing import LAST_MS, format_time, from_epoch_ms, to_epoch_ms

FAST = settings(max_examples=60, deadline=None)
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


def ms(text: str) -> int:
    """Epoch ms of an RFC 3339 time: ``2026-03-29T01:00:00Z``."""
    return to_epoch_ms(datetime.fromisoformat(text))


def runs(expression: str, tz: str, after: str, count: int) -> list[str]:
    found = runs_between(Cron(expression, tz), ms(after), LAST_MS, count)
    return [format_time(run).replace(".000Z", "Z") for run in found]


# Europe/Paris, 2026: 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z); 2026-10-25
# 03:00 CEST -> 02:00 CET (01:00Z), so 02:00-03:00 is shown twice.
# America/New_York, 2026: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01
# 02:00 EDT -> 01:00 EST (06:00Z), so 01:00-02:00 is shown twice.
EXAMPLES = [
    # At set hours: a skipped wall time runs at the first instant after the skip...
    ("30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
    # ... and a repeated one in its first pass only.
    ("30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
     ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
    # Hour field *: the real clock.
    ("0 * * * *", "Europe/Paris", "2026-03-28T23:30:00Z",
     ["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"]),
    ("0 * * * *", "Europe/Paris", "2026-10-24T22:30:00Z",
     ["2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z",
      "2026-10-25T02:00:00Z"]),
    ("*/15 * * * *", "Europe/Paris", "2026-03-29T00:30:00Z",
     ["2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"]),
    ("*/15 * * * *", "Europe/Paris", "2026-10-25T00:30:00Z",
     ["2026-10-25T00:45:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:15:00Z",
      "2026-10-25T01:30:00Z", "2026-10-25T01:45:00Z", "2026-10-25T02:00:00Z"]),
    # Two skipped wall times, one run.
    ("15,45 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     ["2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z", "2026-03-30T00:45:00Z"]),
    ("15,45 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
     ["2026-10-25T00:15:00Z", "2026-10-25T00:45:00Z", "2026-10-26T01:15:00Z"]),
    # Both changes fall on a Sunday.
    ("0 2 * * 0", "Europe/Paris", "2026-03-22T12:00:00Z",
     ["2026-03-29T01:00:00Z", "2026-04-05T00:00:00Z"]),
    ("0 2 * * 0", "Europe/Paris", "2026-10-18T12:00:00Z",
     ["2026-10-25T00:00:00Z", "2026-11-01T01:00:00Z"]),
    # Six fields, the second first: every 10 s of real time.
    ("*/10 * * * * *", "Europe/Paris", "2026-03-29T00:59:40Z",
     ["2026-03-29T00:59:50Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:10Z"]),
    ("*/10 * * * * *", "Europe/Paris", "2026-10-25T00:59:40Z",
     ["2026-10-25T00:59:50Z", "2026-10-25T01:00:00Z", "2026-10-25T01:00:10Z"]),
    ("0 30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
     ["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
    ("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
     ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
    ("30 2 * * *", "America/New_York", "2026-10-31T12:00:00Z",
     ["2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]),
    ("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
     ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
    ("0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
     ["2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"]),
    ("0 * * * *", "America/New_York", "2026-11-01T04:30:00Z",
     ["2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"]),
    ("*/15 * * * *", "America/New_York", "2026-11-01T05:30:00Z",
     ["2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:15:00Z"]),
    ("15,45 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
     ["2026-03-08T07:00:00Z", "2026-03-09T06:15:00Z", "2026-03-09T06:45:00Z"]),
    ("15,45 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
     ["2026-11-01T05:15:00Z", "2026-11-01T05:45:00Z", "2026-11-02T06:15:00Z"]),
    ("0 2 * * 0", "America/New_York", "2026-03-01T12:00:00Z",
     ["2026-03-08T07:00:00Z", "2026-03-15T06:00:00Z"]),
    ("0 1 * * 0", "America/New_York", "2026-10-25T12:00:00Z",
     ["2026-11-01T05:00:00Z", "2026-11-08T06:00:00Z"]),
    ("*/10 * * * * *", "America/New_York", "2026-11-01T05:59:40Z",
     ["2026-11-01T05:59:50Z", "2026-11-01T06:00:00Z", "2026-11-01T06:00:10Z"]),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "tz", "after", "expected"), EXAMPLES)
def test_runs_across_the_clock_changes(
    expression: str, tz: str, after: str, expected: list[str]
) -> None:
    assert runs(expression, tz, after, len(expected)) == expected


INSIDE_A_REPEAT = [
    # After 02:50 CEST (the first pass), 02:00 CET comes next: a smaller wall time.
    ("0 * * * *", "Europe/Paris", "2026-10-25T00:50:00Z", "2026-10-25T01:00:00Z"),
    ("20 * * * *", "Europe/Paris", "2026-10-25T00:10:00Z", "2026-10-25T00:20:00Z"),
    ("20 * * * *", "Europe/Paris", "2026-10-25T00:50:00Z", "2026-10-25T01:20:00Z"),
    ("*/15 * * * *", "Europe/Paris", "2026-10-25T00:50:00Z", "2026-10-25T01:00:00Z"),
    ("*/10 * * * * *", "Europe/Paris", "2026-10-25T00:59:59.500Z", "2026-10-25T01:00:00Z"),
    # In the second pass (02:10 CET).
    ("0 * * * *", "Europe/Paris", "2026-10-25T01:10:00Z", "2026-10-25T02:00:00Z"),
    ("20 * * * *", "Europe/Paris", "2026-10-25T01:10:00Z", "2026-10-25T01:20:00Z"),
    # At set hours the first pass ran it: the second pass does not.
    ("30 2 * * *", "Europe/Paris", "2026-10-25T00:10:00Z", "2026-10-25T00:30:00Z"),
    ("30 2 * * *", "Europe/Paris", "2026-10-25T00:40:00Z", "2026-10-26T01:30:00Z"),
    ("30 2 * * *", "Europe/Paris", "2026-10-25T01:10:00Z", "2026-10-26T01:30:00Z"),
    ("15,45 2 * * *", "Europe/Paris", "2026-10-25T00:20:00Z", "2026-10-25T00:45:00Z"),
    ("15,45 2 * * *", "Europe/Paris", "2026-10-25T01:20:00Z", "2026-10-26T01:15:00Z"),
    ("* 2 * * *", "Europe/Paris", "2026-10-25T01:10:00Z", "2026-10-26T01:00:00Z"),
    ("*/10 * 2 * * *", "Europe/Paris", "2026-10-25T01:10:00Z", "2026-10-26T01:00:00Z"),
    ("0 * * * *", "America/New_York", "2026-11-01T05:50:00Z", "2026-11-01T06:00:00Z"),
    ("30 1 * * *", "America/New_York", "2026-11-01T05:40:00Z", "2026-11-02T06:30:00Z"),
    ("30 1 * * *", "America/New_York", "2026-11-01T06:10:00Z", "2026-11-02T06:30:00Z"),
    # The instant of a skip's run itself: the next one is the next day's.
    ("15,45 2 * * *", "Europe/Paris", "2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z"),
    ("0 2,3 * * *", "Europe/Paris", "2026-03-29T00:59:59.999Z", "2026-03-29T01:00:00Z"),
    ("0 2,3 * * *", "Europe/Paris", "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"),
]


@pytest.mark.parametrize(("expression", "tz", "after", "expected"), INSIDE_A_REPEAT)
def test_next_after_from_inside_a_repeated_hour(
    expression: str, tz: str, after: str, expected: str
) -> None:
    assert Cron(expression, tz).next_after(ms(after)) == ms(expected)


def wall(text: str) -> int:
    return _wall_ms(datetime.fromisoformat(text))


def test_instants_of_a_wall_time() -> None:
    paris = ZoneInfo("Europe/Paris")
    for follows in (True, False):
        assert _instants_of(wall("2026-06-01T12:00"), paris, follows) == [ms("2026-06-01T10:00Z")]
    # Skipped: no run on the real clock, else the instant the clock jumps.
    assert _instants_of(wall("2026-03-29T02:30"), paris, True) == []
    assert _instants_of(wall("2026-03-29T02:30"), paris, False) == [ms("2026-03-29T01:00Z")]
    assert _instants_of(wall("2026-03-29T02:00"), paris, False) == [ms("2026-03-29T01:00Z")]
    assert _instants_of(wall("2026-03-29T03:00"), paris, False) == [ms("2026-03-29T01:00Z")]
    # Repeated: both passes on the real clock, else the first.
    both = [ms("2026-10-25T00:30Z"), ms("2026-10-25T01:30Z")]
    assert _instants_of(wall("2026-10-25T02:30"), paris, True) == both
    assert _instants_of(wall("2026-10-25T02:30"), paris, False) == both[:1]
    assert _instants_of(wall("2026-10-25T03:00"), paris, True) == [ms("2026-10-25T02:00Z")]
    # Lord Howe moves its clock by 30 minutes: 02:00 +10:30 -> 02:30 +11:00.
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    assert _instants_of(wall("2026-10-04T02:15"), lord_howe, True) == []
    assert _instants_of(wall("2026-10-04T02:15"), lord_howe, False) == [ms("2026-10-03T15:30Z")]


def test_change_between_finds_the_instant_the_offset_changes() -> None:
    paris = ZoneInfo("Europe/Paris")
    assert _change_between(ms("2026-03-29T00:00Z"), ms("2026-03-29T02:00Z"), paris) == ms(
        "2026-03-29T01:00Z"
    )
    assert _change_between(ms("2026-10-25T00:59:59.999Z"), ms("2026-10-25T01:00Z"), paris) == ms(
        "2026-10-25T01:00Z"
    )


# The oracle: walk the clock step by step, and run where the rules say.


def changes(tz: str, year: int) -> list[int]:
    """The instants (ms) at which ``tz`` changes its offset in ``year``."""
    zone = ZoneInfo(tz)
    found = []
    start = ms(f"{year}-01-01T00:00Z")
    for step in range(0, 366 * 4):
        low, high = start + step * 6 * HOUR_MS, start + (step + 1) * 6 * HOUR_MS
        if offset(low, zone) != offset(high, zone):
            found.append(_change_between(low, high, zone))
    return found


def offset(instant_ms: int, zone: ZoneInfo) -> timedelta:
    found = from_epoch_ms(instant_ms).astimezone(zone).utcoffset()
    assert found is not None
    return found


def matches(expression: str, wall: datetime) -> bool:
    """Whether croniter's next wall time after the second before ``wall`` is ``wall``."""
    six = len(expression.split()) == 6
    naive = croniter(expression, wall - timedelta(seconds=1), ret_type=datetime,
                     second_at_beginning=six)  # fmt: skip
    return naive.get_next(datetime) == wall


def matching_walls(expression: str, first: datetime, last: datetime) -> set[datetime]:
    """The wall times from ``first`` to ``last`` that ``expression`` matches, by croniter."""
    six = len(expression.split()) == 6
    naive = croniter(expression, first - timedelta(seconds=1), ret_type=datetime,
                     second_at_beginning=six)  # fmt: skip
    return set(itertools.takewhile(lambda wall: wall <= last, iter(naive.get_next, None)))


def oracle(cron: Cron, start_ms: int, end_ms: int, step_ms: int) -> list[int]:
    """The runs in (start_ms, end_ms], by looking at every step of the real clock: a
    matching wall time runs (at set hours, in its first pass only), and at set hours a
    jump of the clock runs if it skipped a matching wall time."""
    zone = ZoneInfo(cron.tz)
    step = timedelta(milliseconds=step_ms)
    previous = from_epoch_ms(start_ms).astimezone(zone).replace(tzinfo=None)
    margin = timedelta(hours=2)
    walls = matching_walls(cron.expression, previous - margin, previous + margin + (
        from_epoch_ms(end_ms) - from_epoch_ms(start_ms)))  # fmt: skip
    found = []
    for instant in range(start_ms + step_ms, end_ms + 1, step_ms):
        local = from_epoch_ms(instant).astimezone(zone)
        here = local.replace(tzinfo=None, fold=0)
        # Where the clock jumped, every wall time strictly between was skipped.
        jumped = here - previous > step and any(previous < wall < here for wall in walls)
        if jumped and not cron.follows_clock:
            found.append(instant)
            previous = here
            continue
        if (cron.follows_clock or local.fold == 0) and here in walls:
            found.append(instant)
        previous = here
    return found


#: Zones whose changes differ in kind: an hour in the north and south, 30 minutes, at
#: midnight (Sydney's and Dublin's are like these; the properties below take them).
ORACLE_ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]
ORACLE_CRONS = [
    "30 2 * * *", "0 * * * *", "*/15 * * * *", "15,45 2 * * *", "20 * * * *", "0,30 1-3 * * *",
    "* 2 * * *", "0 2,3 * * *", "0 0 * * *", "45 23 * * *", "10 0-1 * * *",
]  # fmt: skip
ORACLE_SECOND_CRONS = ["*/10 * * * * *", "30 * 2 * * *", "15 * 0 * * *"]


def check_against_the_oracle(cron: Cron, change_ms: int, window_ms: int, step_ms: int) -> None:
    start_ms, end_ms = change_ms - window_ms, change_ms + window_ms
    expected = oracle(cron, start_ms, end_ms, step_ms)
    assert runs_between(cron, start_ms, end_ms, 100_000) == expected, cron
    # From anywhere in the window, and just before and after each run near the change
    # (inside either pass of a repeated stretch too).
    probes = {start_ms + k * (7 * step_ms + 13_001) for k in range(40)}
    near = [run for run in expected if abs(run - change_ms) <= window_ms // 6]
    probes |= {run + delta for run in near for delta in (-1, 1)}
    for probe in sorted(p for p in probes if start_ms <= p < end_ms):
        later = [run for run in expected if run > probe]
        if later:
            assert cron.next_after(probe) == later[0], (cron, format_time(probe))


@pytest.mark.parametrize("tz", ORACLE_ZONES)
def test_cron_against_a_clock_walking_oracle(tz: str) -> None:
    for change in changes(tz, 2026):
        for expression in ORACLE_CRONS:
            check_against_the_oracle(Cron(expression, tz), change, 8 * HOUR_MS, 60_000)
        for expression in ORACLE_SECOND_CRONS:
            check_against_the_oracle(Cron(expression, tz), change, 15 * 60_000, 1000)


def test_the_oracle_sees_the_changes_of_2026() -> None:
    assert changes("Europe/Paris", 2026) == [ms("2026-03-29T01:00Z"), ms("2026-10-25T01:00Z")]
    assert all(len(changes(tz, 2026)) == 2 for tz in ORACLE_ZONES)
    assert all(len(changes(tz, 2026)) == 2 for tz in ("Australia/Sydney", "Europe/Dublin"))


# Properties, against croniter itself where no clock changes.


def field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    atom = st.one_of(
        number.map(str),
        st.tuples(number, number).map(lambda pair: f"{min(pair)}-{max(pair)}"),
        st.integers(1, high - low + 1).map(lambda step: f"*/{step}"),
        st.tuples(number, number, st.integers(1, high - low + 1)).map(
            lambda t: f"{min(t[:2])}-{max(t[:2])}/{t[2]}"
        ),
    )
    return st.one_of(st.just("*"), st.lists(atom, min_size=1, max_size=3).map(",".join))


# The day of month stops at 28: every expression then matches some day.
EXPRESSIONS = st.tuples(field(0, 59), field(0, 23), field(1, 28), field(1, 12), field(0, 6)).map(
    " ".join
)
INSTANTS = st.integers(ms("2000-01-01T00:00Z"), ms("2040-01-01T00:00Z"))


@FAST
@given(EXPRESSIONS, INSTANTS, st.sampled_from(["UTC", "Asia/Tokyo"]))
def test_next_after_is_croniters_where_the_clock_never_changes(
    expression: str, after_ms: int, tz: str
) -> None:
    start = from_epoch_ms(after_ms).astimezone(ZoneInfo(tz))
    expected = croniter(expression, start, ret_type=datetime).get_next(datetime)
    assert Cron(expression, tz).next_after(after_ms) == to_epoch_ms(expected)


@FAST
@given(EXPRESSIONS, INSTANTS)
def test_next_after_is_croniters_between_two_clock_changes(expression: str, after_ms: int) -> None:
    paris = ZoneInfo("Europe/Paris")
    found = Cron(expression, "Europe/Paris").next_after(after_ms)
    assert found is not None
    # Paris changes its clock months apart: offsets sampled a day apart see any change.
    samples = [*range(after_ms, found, DAY_MS), found]
    if len({offset(sample, paris) for sample in samples}) == 1:
        start = from_epoch_ms(after_ms).astimezone(paris)
        expected = croniter(expression, start, ret_type=datetime).get_next(datetime)
        assert found == to_epoch_ms(expected)


ZONES = ["UTC", "Asia/Tokyo", "Europe/Paris", "America/New_York", "Australia/Lord_Howe",
         "America/Santiago", "Europe/Dublin"]  # fmt: skip
SECOND_EXPRESSIONS = st.tuples(field(0, 59), EXPRESSIONS).map(" ".join)
RECURRENCES = st.one_of(
    st.builds(Cron, st.one_of(EXPRESSIONS, SECOND_EXPRESSIONS), st.sampled_from(ZONES)),
    st.builds(Every, st.integers(MIN_PERIOD_MS, 10 * DAY_MS), st.integers(-(10**13), 10**13)),
    st.builds(parse_times, st.lists(INSTANTS, min_size=1, max_size=30)),
)


@FAST
@given(RECURRENCES, INSTANTS)
def test_runs_increase_and_runs_between_agrees(recurrence: Recurrence, after_ms: int) -> None:
    iterated = []
    run: int | None = after_ms
    for _ in range(25):
        run = recurrence.next_after(run)
        if run is None:
            break
        assert run > (iterated[-1] if iterated else after_ms)
        iterated.append(run)
    until = iterated[-1] if iterated else after_ms + DAY_MS
    assert runs_between(recurrence, after_ms, until, 25) == iterated
    assert runs_between(recurrence, after_ms, until, 3) == iterated[:3]
    if len(iterated) > 2:
        assert runs_between(recurrence, after_ms, iterated[-2], 25) == iterated[:-1]
        assert runs_between(recurrence, iterated[0], until, 25) == iterated[1:]
    assert runs_between(recurrence, after_ms, until, 0) == []


@settings(max_examples=40, deadline=None)
@given(st.one_of(EXPRESSIONS, SECOND_EXPRESSIONS), st.sampled_from(ZONES), INSTANTS)
def test_each_run_is_a_matching_wall_time_or_the_end_of_a_skip(
    expression: str, tz: str, after_ms: int
) -> None:
    cron, zone = Cron(expression, tz), ZoneInfo(tz)
    found = runs_between(cron, after_ms, after_ms + 400 * DAY_MS, 12)
    assert len(found) == len(set(found))
    for run in found:
        local = from_epoch_ms(run).astimezone(zone)
        matching = matches(expression, local.replace(tzinfo=None, fold=0))
        if cron.follows_clock:
            assert matching
        else:
            assert local.fold == 0
            assert matching or offset(run - 1, zone) < offset(run, zone)


# Every and Times.


def test_every_runs_on_its_anchors_grid_on_both_sides_of_it() -> None:
    hourly_at_half_past = Every(HOUR_MS, anchor_ms=-HOUR_MS // 2)
    assert hourly_at_half_past.next_after(0) == HOUR_MS // 2
    assert hourly_at_half_past.next_after(HOUR_MS // 2) == 3 * HOUR_MS // 2
    assert hourly_at_half_past.next_after(-HOUR_MS // 2 - 1) == -HOUR_MS // 2
    assert hourly_at_half_past.next_after(-5 * HOUR_MS) == -9 * HOUR_MS // 2
    minutely = Every(60_000, anchor_ms=10_000)
    assert minutely.next_after(0) == 10_000
    assert minutely.next_after(10_000) == 70_000
    assert minutely.next_after(-50_001) == -50_000
    assert minutely.next_after(-50_000) == 10_000
    # By default "every 1h" runs on the hour UTC.
    assert Every(HOUR_MS).next_after(ms("2026-05-01T10:20Z")) == ms("2026-05-01T11:00Z")
    assert parse_every("15m").next_after(ms("2026-05-01T10:20Z")) == ms("2026-05-01T10:30Z")
    assert parse_every("1h30m", anchor_ms=5) == Every(90 * 60_000, 5)
    assert Every(HOUR_MS).next_after(LAST_MS) is None


@FAST
@given(st.integers(MIN_PERIOD_MS, 10**12), st.integers(-(10**14), 10**14), INSTANTS)
def test_every_is_the_first_point_of_its_grid_after(period: int, anchor: int, after: int) -> None:
    found = Every(period, anchor).next_after(after)
    assert found is not None
    assert (found - anchor) % period == 0
    assert after < found <= after + period


def test_times_are_sorted_without_duplicates() -> None:
    times = parse_times([30, 10, 20, 10, 30])
    assert times.times_ms == (10, 20, 30)
    assert times == Times((10, 20, 30)) == Times((30, 20, 10, 20))
    assert [times.next_after(t) for t in (0, 10, 15, 29, 30)] == [10, 20, 20, 30, None]
    assert runs_between(times, 10, 30, 10) == [20, 30]
    assert parse_times(iter(range(MAX_TIMES))).times_ms == tuple(range(MAX_TIMES))
    assert parse_times([-5, 5]).next_after(-10) == -5


# Validation: what a user sees.


@pytest.mark.parametrize(
    ("expression", "rule", "message"),
    [
        ("* * * *", "format",
         "cron must have 5 fields (minute hour day month weekday) or 6 (second first); "
         "got 4: '* * * *'"),
        ("", "format", "got 0: ''"),
        ("* * * * * * *", "format", "got 7: '* * * * * * *'"),
        ("@daily", "format", "got 1: '@daily'"),
        ("a b c d e", "format", "cron field 1 (minute) 'a' in 'a b c d e' is not valid: "
         "the minute takes 0-59"),
        ("60 * * * *", "format", "cron field 1 (minute) '60' in '60 * * * *' is not valid"),
        ("0 24 * * *", "format", "cron field 2 (hour) '24'"),
        ("0 0 32 * *", "format", "cron field 3 (day of month) '32'"),
        ("0 0 * 13 *", "format", "cron field 4 (month) '13'"),
        ("0 0 * * 8", "format", "cron field 5 (day of week) '8'"),
        ("60 0 0 * * *", "format", "cron field 1 (second) '60'"),
        ("*/0 * * * *", "format", "cron field 1 (minute) '*/0'"),
        ("0 0 * * 1#6", "format", "cron field 5 (day of week) '1#6'"),
        ("R * * * *", "format", "random (R) and hashed (H) fields are not supported"),
        ("0 H * * *", "format", "cron field 2 (hour) 'H'"),
        ("0 0 30 2 *", "never", "cron '0 0 30 2 *' never runs: no date matches it"),
        ("0 0 31 4,6,9,11 *", "never", "never runs"),
    ],
)  # fmt: skip
def test_a_bad_cron_says_what_is_wrong(expression: str, rule: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_cron(expression, "UTC")
    assert (raised.value.field, raised.value.rule) == ("cron", rule)
    assert message in str(raised.value)


def test_a_rare_cron_is_not_never() -> None:
    # The 29th of February, and a fifth Monday in February (a leap year starting on a
    # Monday, the last one 2016): rare, not never.
    leap_day = parse_cron("0 0 29 2 *", "UTC")
    assert leap_day.next_after(ms("2026-01-01T00:00Z")) == ms("2028-02-29T00:00Z")
    fifth_monday = parse_cron("0 0 * 2 1#5", "UTC")
    assert fifth_monday.next_after(ms("2017-01-01T00:00Z")) == ms("2044-02-29T00:00Z")
    assert parse_cron("0 0 L 2 *", "UTC").next_after(ms("2026-01-01T00:00Z")) == ms(
        "2026-02-28T00:00Z"
    )


@given(st.text(alphabet="0123456789*/-,LW#?HRlw abcdeJANMONSUNfri\t\n\u00a0", max_size=30))
@settings(max_examples=200, deadline=None)
def test_no_croniter_exception_escapes(expression: str) -> None:
    try:
        cron = Cron(expression, "Europe/Paris")
    except ValidationError:
        return
    found = cron.next_after(ms("2026-10-25T00:30Z"))
    assert found is None or found > ms("2026-10-25T00:30Z")


@pytest.mark.parametrize("expression", ["a b c d e", "60 * * * *", "* * * * * * *", "", 5, None])
def test_garbage_is_a_validation_error(expression: object) -> None:
    with pytest.raises(ValidationError) as raised:
        Cron(expression, "UTC")  # type: ignore[arg-type]
    assert raised.value.field == "cron"


@pytest.mark.parametrize("tz", ["Europe/Pariss", "", "Europe", "../etc", "/etc/localtime", 3])
def test_an_unknown_zone_says_what_a_zone_is(tz: object) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_cron("0 9 * * *", tz)  # type: ignore[arg-type]
    assert (raised.value.field, raised.value.rule) == ("tz", "zone")
    if tz == "Europe/Pariss":
        assert str(raised.value) == (
            "unknown time zone 'Europe/Pariss' (an IANA name such as Europe/Paris or UTC)"
        )


@pytest.mark.parametrize(
    ("period", "rule", "message"),
    [
        ("500ms", "min", "every must be at least 1s; got 500ms"),
        (500, "min", "every must be at least 1s; got 500ms"),
        (0, "min", "every must be at least 1s; got 0ms"),
        (-1000, "min", "every must be at least 1s; got -1s"),
        ("soon", "duration", "every must be a duration such as 1s, 15m, 1h or 1h30m; got 'soon'"),
        ("10", "duration", "got '10'"),
        (1.5, "type", "every must be an integer (ms); got 1.5"),
        (True, "type", "got True"),
    ],
)
def test_a_bad_period_says_what_is_wrong(period: object, rule: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_every(period)  # type: ignore[arg-type]
    assert (raised.value.field, raised.value.rule) == ("every", rule)
    assert message in str(raised.value)
    assert parse_every("1s") == Every(MIN_PERIOD_MS)


@pytest.mark.parametrize(
    ("times", "rule", "message"),
    [
        ([], "empty", "times must hold at least one time"),
        (range(MAX_TIMES + 1), "max", "times may hold at most 1000 times"),
        ([1, 2.5], "type", "times must be an integer (ms); got 2.5"),
        ([True], "type", "got True"),
        ([LAST_MS + 1], "range", "after 9999-12-31T23:59:59.999Z"),
    ],
)
def test_bad_times_say_what_is_wrong(times: list[object], rule: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_times(times)  # type: ignore[arg-type]
    assert (raised.value.field, raised.value.rule) == ("times", rule)
    assert message in str(raised.value)


def test_the_hour_field_says_which_rule_a_cron_follows() -> None:
    assert Cron("*/15 * * * *").follows_clock
    assert Cron("0 * * * 1-5").follows_clock
    assert Cron("*/10 0 * * * *").follows_clock  # six fields: the hour is the third
    assert not Cron("0 0 */2 * * *").follows_clock
    assert not Cron("30 2 * * *").follows_clock
    assert not Cron("0 */1 * * *").follows_clock
    assert not Cron("0 0-23 * * *").follows_clock


def test_runs_end_with_the_last_instant_delayline_shows() -> None:
    assert Cron("0 0 1 1 *").next_after(ms("9999-06-01T00:00Z")) is None
    assert Cron("0 0 1 1 *", "Pacific/Kiritimati").next_after(ms("9999-06-01T00:00Z")) is None
    assert Cron("* * * * *").next_after(LAST_MS) is None
    assert Cron("0 0 1 1 *").next_after(ms("9998-06-01T00:00Z")) == ms("9999-01-01T00:00Z")
    # 22:00 in New York on the last day is after it in UTC.
    new_york = Cron("0 22 31 12 *", "America/New_York")
    assert new_york.next_after(ms("9999-12-31T00:00Z")) is None
    assert new_york.next_after(ms("9998-12-31T00:00Z")) == ms("9999-01-01T03:00Z")


def test_a_cron_is_a_value() -> None:
    assert Cron("0 9 * * MON-FRI", "Europe/Paris") == parse_cron("0 9 * * MON-FRI", "Europe/Paris")
    assert Cron("0 9 * * *").tz == "UTC"
