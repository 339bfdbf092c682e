"""Listing recurring schedules, the pure parts: a schedule's state in the wheel as a
listing shows it, its row's JSON, the preview of its next runs, the request, and how
a scan tells schedule keys from message slots."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from delayline import timing
from delayline.client_base import ClientBase
from delayline.errors import ValidationError
from delayline.listing import MESSAGES, SCHEDULES, ListRequest
from delayline.schedules import ops, runs, state
from delayline.schedules.listed import ACTIVE, FINISHED, PAUSED, ListedSchedule, run_view
from delayline.schedules.recurrence import Every, Times, parse_cron
from delayline.schedules.spec import Schedule
from delayline.validation import Limits

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z, on a whole hour
HORIZON_MS = 60_000


def every(period_ms: int, **options: Any) -> Schedule:
    return Schedule.create("reports", "every", b"run", Every(period_ms), limits=Limits(), **options)


def at(epoch_ms: int) -> int:
    """An instant relative to T0, for readable assertions."""
    return epoch_ms - T0


def handed(schedule: Schedule, now_ms: int = T0) -> runs.Armed:
    """The state after the put at ``now_ms`` and a firing then: one horizon handed over."""
    return runs.hand_off(
        runs.arm(schedule, "1-0", now_ms), now_ms=now_ms, horizon_ms=HORIZON_MS, refill=False
    ).armed


def test_an_active_schedule_shows_the_runs_sent_by_the_scans_time() -> None:
    armed = handed(every(10_000))  # runs T0+10s .. T0+60s handed over, T0+70s armed
    fresh = ListedSchedule.of(armed, T0 + 5_000)
    assert (fresh.state, at(fresh.next_run_ms or 0), fresh.last_run_ms, fresh.runs) == (
        ACTIVE, 10_000, None, 0,
    )  # fmt: skip
    later = ListedSchedule.of(armed, T0 + 25_000)
    assert (at(later.next_run_ms or 0), at(later.last_run_ms or 0), later.runs) == (
        30_000, 20_000, 2,
    )  # fmt: skip
    on_a_run = ListedSchedule.of(armed, T0 + 30_000)  # a run at the scan's time was sent
    assert (at(on_a_run.last_run_ms or 0), on_a_run.runs) == (30_000, 3)
    # The scheduler behind (down): the armed run is overdue, every handed run sent.
    behind = ListedSchedule.of(armed, T0 + 95_000)
    assert (at(behind.next_run_ms or 0), at(behind.last_run_ms or 0), behind.runs) == (
        70_000, 60_000, 6,
    )  # fmt: skip
    assert (behind.topic, behind.name, behind.version, behind.read_at_ms) == (
        "reports", "every", "1-0", T0 + 95_000,
    )  # fmt: skip


def test_a_run_before_the_put_is_not_shown_as_sent() -> None:
    # Put at T0+30s: the first run (T0+1min) is handed over at once, and not sent yet.
    armed = handed(every(60_000), T0 + 30_000)
    assert armed.handed_until_ms == T0 + 60_000
    listed = ListedSchedule.of(armed, T0 + 45_000)
    assert (listed.last_run_ms, listed.runs, at(listed.next_run_ms or 0)) == (None, 0, 60_000)


def test_a_paused_schedule_has_no_next_run_and_keeps_its_last() -> None:
    paused, cancels = runs.pause(handed(every(10_000)), "2-0", T0 + 25_000)
    assert len(cancels) == 4  # T0+30s .. T0+60s
    listed = ListedSchedule.of(paused, T0 + 40_000)
    assert (listed.state, listed.next_run_ms, at(listed.last_run_ms or 0)) == (
        PAUSED, None, 20_000,
    )  # fmt: skip
    assert (listed.runs, listed.version, listed.definition.paused) == (2, "2-0", True)
    # Put paused from the start: nothing sent.
    put_paused = runs.arm(every(10_000, paused=True), "1-0", T0)
    assert ListedSchedule.of(put_paused, T0 + 40_000).state == PAUSED


def test_a_schedule_finishes_once_its_last_run_is_sent() -> None:
    armed = handed(every(10_000, max_runs=3))  # all three handed over at once
    assert armed.next_run_ms is None
    waiting = ListedSchedule.of(armed, T0 + 15_000)
    assert (waiting.state, at(waiting.next_run_ms or 0), waiting.runs) == (ACTIVE, 20_000, 1)
    done = ListedSchedule.of(armed, T0 + 30_000)
    assert (done.state, done.next_run_ms, at(done.last_run_ms or 0), done.runs) == (
        FINISHED, None, 30_000, 3,
    )  # fmt: skip
    # Explicit times all past, and an end that came: finished too.
    times = Schedule.create("t", "once", b"x", Times((T0 + 5_000,)), limits=Limits())
    assert ListedSchedule.of(handed(times), T0 + 6_000).state == FINISHED
    ended = handed(every(10_000, end_ms=T0 + 20_000))
    assert ListedSchedule.of(ended, T0 + 20_000).state == FINISHED


def test_skipped_runs_are_shown_as_the_state_counts_them() -> None:
    armed = runs.arm(every(1_000), "1-0", T0)  # catch-up: the latest missed run
    late = runs.hand_off(armed, now_ms=T0 + 10_500, horizon_ms=0).armed  # 10 missed
    listed = ListedSchedule.of(late, T0 + 10_600)
    assert (listed.skipped, listed.runs, at(listed.last_run_ms or 0)) == (9, 1, 10_000)


def test_a_rows_json_round_trips_with_its_definition() -> None:
    cron = Schedule.create(
        "reports", "weekly", b"\xff\x00", parse_cron("0 9 * * MON", "Europe/Paris"),
        limits=Limits(), key="k", headers={"team": "a"}, start_ms=T0, end_ms=T0 * 2,
        max_runs=50, paused=True,
    )  # fmt: skip
    rows = [
        ListedSchedule.of(handed(every(10_000)), T0 + 25_000),
        ListedSchedule.of(runs.arm(cron, "7-3", T0), T0),
    ]
    for row in rows:
        assert ListedSchedule.from_json(row.dumps()) == row
        assert ListedSchedule.from_json(row.dumps().encode()) == row
    shown = json.loads(rows[0].dumps())
    assert shown["next_run"] == "2027-01-15T08:00:30.000Z"
    assert shown["last_run"] == "2027-01-15T08:00:20.000Z"
    assert shown["definition"]["recurrence"] == {"every_ms": 10_000, "anchor_ms": 0}
    assert {"topic", "name", "state", "version", "runs", "skipped", "read_at_ms"} <= set(shown)
    paused = rows[1].to_json()
    assert (paused["state"], paused["next_run"], paused["last_run"]) == (PAUSED, None, None)
    assert paused["definition"]["body"] == "/wA="


def test_a_rows_view_shows_the_definition_in_the_terms_of_a_put() -> None:
    cron = Schedule.create(
        "reports", "weekly", b"\xff\x00", parse_cron("0 9 * * MON", "Europe/Paris"),
        limits=Limits(), paused=True,
    )  # fmt: skip
    row = ListedSchedule.of(runs.arm(cron, "7-3", T0), T0)
    view = row.to_view()
    assert view == {
        **{name: value for name, value in row.to_json().items() if name != "definition"},
        "read_at": "2027-01-15T08:00:00.000Z",
        "definition": cron.to_view(),
    }
    assert (view["definition"]["body_b64"], view["definition"]["cron"]) == ("/wA=", "0 9 * * MON")


def test_a_runs_view_is_in_utc_and_on_the_wall_clock_of_the_schedules_zone() -> None:
    paris = Schedule.create(
        "reports", "daily", b"", parse_cron("0 9 * * *", "Europe/Paris"), limits=Limits()
    )
    assert paris.zone == "Europe/Paris"
    assert run_view(paris, T0) == {
        "at": "2027-01-15T08:00:00.000Z",
        "at_ms": T0,
        "local": "2027-01-15T09:00:00.000+01:00",
    }
    assert every(1_000).zone == "UTC"
    assert run_view(every(1_000), T0 + 1)["local"] == "2027-01-15T08:00:00.001+00:00"


def test_upcoming_runs_count_those_sent_since_the_scan() -> None:
    listed = ListedSchedule.of(handed(every(10_000, max_runs=5)), T0 + 25_000)  # 2 sent
    assert [at(r) for r in listed.upcoming(10, T0 + 25_000)] == [30_000, 40_000, 50_000]
    # A run sent between the scan and now counts toward max_runs.
    assert [at(r) for r in listed.upcoming(10, T0 + 31_000)] == [40_000, 50_000]
    assert [at(r) for r in listed.upcoming(1, T0 + 25_000)] == [30_000]
    paused = ListedSchedule.of(runs.pause(handed(every(10_000)), "2", T0 + 25_000)[0], T0 + 25_000)
    assert [at(r) for r in paused.upcoming(2, T0 + 41_000)] == [50_000, 60_000]
    finished = ListedSchedule.of(handed(every(10_000, max_runs=1)), T0 + 20_000)
    assert finished.upcoming(5, T0 + 20_000) == []


def test_preview_every_within_its_bounds_and_max_runs() -> None:
    assert [at(r) for r in runs.preview(every(60_000), T0, 3)] == [60_000, 120_000, 180_000]
    assert [at(r) for r in runs.preview(every(60_000), T0 + 1, 2)] == [60_000, 120_000]
    bounded = every(60_000, start_ms=T0 + 600_000, end_ms=T0 + 780_000)
    assert [at(r) for r in runs.preview(bounded, T0, 10)] == [600_000, 660_000, 720_000, 780_000]
    capped = every(60_000, max_runs=5)
    assert len(runs.preview(capped, T0, 10)) == 5
    assert [at(r) for r in runs.preview(capped, T0, 10, runs_done=3)] == [60_000, 120_000]
    assert runs.preview(capped, T0, 10, runs_done=5) == []
    assert runs.preview(every(60_000), T0, 0) == []


def test_preview_a_cron_in_a_zone_across_the_spring_change() -> None:
    # 02:30 is skipped in Europe/Paris on 2027-03-28: that day runs at 03:00 CEST.
    cron = Schedule.create(
        "t", "night", b"x", parse_cron("30 2 * * *", "Europe/Paris"), limits=Limits()
    )
    after_ms = timing.to_epoch_ms(datetime(2027, 3, 26, 12, tzinfo=UTC), "after")
    assert [timing.format_time(r) for r in runs.preview(cron, after_ms, 4)] == [
        "2027-03-27T01:30:00.000Z",  # 02:30 CET
        "2027-03-28T01:00:00.000Z",  # 03:00 CEST, the end of the skip
        "2027-03-29T00:30:00.000Z",  # 02:30 CEST
        "2027-03-30T00:30:00.000Z",
    ]


def test_preview_explicit_times() -> None:
    times = Schedule.create(
        "t", "dates", b"x", Times((T0 + 3_000, T0 + 1_000, T0 + 2_000)), limits=Limits()
    )
    assert [at(r) for r in runs.preview(times, T0, 10)] == [1_000, 2_000, 3_000]
    assert [at(r) for r in runs.preview(times, T0 + 1_000, 1)] == [2_000]
    assert runs.preview(times, T0 + 3_000, 10) == []


def test_a_listing_of_schedules_takes_a_topic_and_a_name_only() -> None:
    request = ListRequest(kind=SCHEDULES, topic="reports", name="daily", limit=5)
    assert ListRequest.from_json(request.to_json()) == request
    assert request.selects_schedule("reports", "daily")
    assert not request.selects_schedule("reports", "weekly")
    assert not request.selects_schedule("other", "daily")
    assert ListRequest(kind=SCHEDULES).selects_schedule("any", "thing")
    # A request of an older client, without a kind, lists messages; a listing of
    # messages is written as an older scheduler reads it.
    assert ListRequest.from_json('{"topic": "t", "limit": 3}').kind == MESSAGES
    messages = ListRequest(topic="t", key="k", from_ms=1, to_ms=2, limit=3)
    assert json.loads(messages.to_json()) == {
        "topic": "t", "key": "k", "from_ms": 1, "to_ms": 2, "limit": 3,
    }  # fmt: skip
    assert ListRequest.from_json(messages.to_json()) == messages
    with pytest.raises(ValidationError, match="a listing is of messages or schedules"):
        ListRequest(kind="topics")
    with pytest.raises(ValidationError, match="a listing of messages takes no name"):
        ListRequest(name="daily")
    with pytest.raises(ValidationError, match="a topic and a name only"):
        ListRequest(kind=SCHEDULES, key="k")


def test_the_key_column_tells_schedule_keys_from_every_other_key() -> None:
    schedule_keys = [ops.schedule_key("t", f"s{n}") for n in range(1_000)]
    schedule_keys.append(timing.wheel_key(ops.SCHEDULE_SLOT_MS, timing.MAX_SHARDS - 1, True))
    assert all(key < ops.SCHEDULE_KEYS_BELOW for key in schedule_keys)
    others = [
        timing.wheel_key(timing.REJECT_SLOT_MS, 0),
        timing.wheel_key(timing.REJECT_SLOT_MS, timing.MAX_SHARDS - 1, True),
        timing.wheel_key(0, 0),
        timing.wheel_key(T0, 3, True),
    ]
    assert all(key >= ops.SCHEDULE_KEYS_BELOW for key in others)


def test_a_scan_reads_addresses_before_it_decodes_a_definition() -> None:
    stored = [handed(every(10_000)), runs.arm(every(60_000, paused=True), "2-0", T0)]
    value = state.encode(stored)
    found = list(state.addresses(value))
    assert [address for address, _ in found] == [("reports", "every")] * 2
    assert [state.decode_line(line) for _, line in found] == stored


def test_a_preview_takes_1_to_1000_runs() -> None:
    ClientBase._check_preview(1)
    ClientBase._check_preview(1_000)
    for n in (0, 1_001, True, 2.0):
        with pytest.raises(ValidationError, match="n must be 1 to 1,000"):
            ClientBase._check_preview(n)  # type: ignore[arg-type]
