"""A schedule's life in the wheel, as pure functions: hand-off one horizon ahead,
catch-up of missed runs by each policy, and what put, pause, resume and a replace
cancel."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delayline import ids
from delayline.schedules import runs
from delayline.schedules.recurrence import Every, Times, parse_cron
from delayline.schedules.spec import ALL, LATEST, SKIP, CatchUp, Schedule
from delayline.validation import Limits

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z, on a whole hour
HORIZON_MS = 60_000


def every(period_ms: int, **options: Any) -> Schedule:
    return Schedule.create("reports", "every", b"run", Every(period_ms), limits=Limits(), **options)


def test_a_new_schedule_starts_after_the_batch_that_reads_it() -> None:
    armed = runs.arm(every(1_000), "v1", T0 + 500)
    assert armed.next_run_ms == T0 + 1_000
    # A horizon before it, or up to half a horizon sooner, at the schedule's phase.
    deadline_ms, cycle_ms = T0 + 1_000 - HORIZON_MS, runs.refill_ms(HORIZON_MS)
    at_ms = runs.fire_at_ms(armed, HORIZON_MS)
    assert at_ms is not None
    assert deadline_ms - cycle_ms < at_ms <= deadline_ms
    assert at_ms % cycle_ms == runs.phase_ms(armed.schedule, cycle_ms)


def test_a_firing_hands_over_every_run_within_the_horizon_and_arms_the_next() -> None:
    armed = runs.arm(every(10_000), "v1", T0)
    handoff = runs.hand_off(armed, now_ms=T0, horizon_ms=HORIZON_MS, refill=False)
    assert [run.run_ms for run in handoff.runs] == [T0 + k * 10_000 for k in range(1, 7)]
    assert handoff.armed.next_run_ms == T0 + 70_000
    assert handoff.armed.handed_until_ms == T0 + 60_000
    assert handoff.armed.runs == 6
    assert handoff.skipped == 0
    # Nothing more until the next run comes within the horizon.
    again = runs.hand_off(handoff.armed, now_ms=T0 + 1, horizon_ms=HORIZON_MS, refill=False)
    assert again.runs == []
    # By default a firing also hands over the runs of half a horizon after it.
    refilled = runs.hand_off(armed, now_ms=T0, horizon_ms=HORIZON_MS)
    until_ms = T0 + HORIZON_MS + runs.refill_ms(HORIZON_MS)
    assert [run.run_ms for run in refilled.runs] == list(range(T0 + 10_000, until_ms + 1, 10_000))


def test_a_frequent_schedule_fires_once_per_half_horizon_and_keeps_a_horizon_handed_over() -> None:
    armed = runs.arm(every(1_000), "v1", T0)
    handed: list[int] = []
    firings = []
    now_ms = T0
    while now_ms < T0 + 600_000:
        handoff = runs.hand_off(armed, now_ms=now_ms, horizon_ms=HORIZON_MS)
        handed += [run.run_ms for run in handoff.runs]
        armed = handoff.armed
        firings.append(now_ms)
        # Each run is handed over a horizon ahead at least.
        assert handed[-1] >= now_ms + HORIZON_MS
        fire_at_ms = runs.fire_at_ms(armed, HORIZON_MS)
        assert fire_at_ms is not None
        now_ms = fire_at_ms
    assert handed == list(range(T0 + 1_000, handed[-1] + 1, 1_000))
    # Ten minutes of runs every second, in a firing per half a horizon, each at the
    # schedule's phase, after the first.
    cycle_ms = runs.refill_ms(HORIZON_MS)
    assert {b - a for a, b in itertools.pairwise(firings[1:])} == {cycle_ms}
    assert {at % cycle_ms for at in firings[1:]} == {runs.phase_ms(armed.schedule, cycle_ms)}


def test_schedules_fire_at_phases_spread_over_half_a_horizon() -> None:
    cycle_ms = runs.refill_ms(HORIZON_MS)
    # Crons due at the same second 0: each fires at its own phase before its deadline.
    fire_times = []
    for n in range(200):
        cron = parse_cron(f"{n % 60} * * * *", "UTC")
        schedule = Schedule.create("t", f"cron-{n}", b"x", cron, limits=Limits())
        armed = runs.arm(schedule, "v1", T0)
        assert armed.next_run_ms is not None
        at_ms = runs.fire_at_ms(armed, HORIZON_MS)
        assert at_ms is not None
        assert armed.next_run_ms - HORIZON_MS - cycle_ms < at_ms <= armed.next_run_ms - HORIZON_MS
        fire_times.append(at_ms % 1_000)
    # Spread over the cycle, not at the second's start.
    assert len(set(fire_times)) > 150


def test_upcoming_runs_are_those_of_a_schedule_put_then() -> None:
    assert runs.preview(every(60_000), T0 + 1, 3) == [T0 + 60_000, T0 + 120_000, T0 + 180_000]
    assert runs.preview(every(60_000), T0, 0) == []
    bounded = every(60_000, start_ms=T0 + 120_000, end_ms=T0 + 240_000)
    assert runs.preview(bounded, T0, 10) == [T0 + 120_000, T0 + 180_000, T0 + 240_000]
    assert runs.preview(every(60_000, max_runs=2), T0, 10) == [T0 + 60_000, T0 + 120_000]
    explicit = Schedule.create("t", "n", b"", Times((T0 - 1, T0 + 5)), limits=Limits())
    assert runs.preview(explicit, T0, 10) == [T0 + 5]
    # The cron's own rules: 02:30 in Paris on the day it skips is 03:00 CEST (01:00Z).
    paris = Schedule.create(
        "t", "n", b"", parse_cron("30 2 * * *", "Europe/Paris"), limits=Limits()
    )
    march_27 = 1_806_111_000_000  # 2027-03-27T01:30:00Z, 02:30 CET
    assert runs.preview(paris, march_27 - 1, 3) == [
        march_27,
        march_27 + 86_400_000 - 1_800_000,
        march_27 + 2 * 86_400_000 - 3_600_000,
    ]


def test_run_ids_are_derived_from_schedule_version_and_time() -> None:
    schedule = every(1_000)
    first = runs.hand_off(runs.arm(schedule, "v1", T0), now_ms=T0, horizon_ms=5_000)
    replay = runs.hand_off(runs.arm(schedule, "v1", T0), now_ms=T0, horizon_ms=5_000)
    other = runs.hand_off(runs.arm(schedule, "v2", T0), now_ms=T0, horizon_ms=5_000)
    assert first.runs == replay.runs
    assert {run.id for run in first.runs}.isdisjoint(run.id for run in other.runs)
    for run in first.runs:
        assert ids.is_message_id(run.id)
        assert ids.deliver_at_ms_of(run.id) == run.run_ms


def test_run_headers_name_the_schedule_and_the_runs_time() -> None:
    schedule = every(1_000, headers={"team": "billing"})
    assert runs.run_headers(schedule, T0) == {
        "team": "billing",
        "delayline-schedule": "every",
        "delayline-run-at": "2027-01-15T08:00:00.000Z",
    }


@pytest.mark.parametrize(
    ("policy", "sent", "skipped"),
    [
        (SKIP, [], 30),
        (LATEST, [T0 + 29_000], 29),
        (ALL, [T0 + k * 1_000 for k in range(20, 30)], 20),
    ],
)
def test_missed_runs_follow_the_catch_up_policy(policy: str, sent: list[int], skipped: int) -> None:
    catch_up = CatchUp.create(policy, window_ms=10_000, max_runs=100)
    armed = runs.Armed(every(1_000, catch_up=catch_up), "v1", next_run_ms=T0)
    # Down from T0 to T0 + 30 s, with a 2 s horizon.
    handoff = runs.hand_off(armed, now_ms=T0 + 30_000, horizon_ms=2_000, refill=False)
    assert [run.run_ms for run in handoff.runs] == [*sent, T0 + 30_000, T0 + 31_000, T0 + 32_000]
    assert handoff.skipped == skipped
    assert handoff.armed.next_run_ms == T0 + 33_000


def test_catch_up_all_sends_the_latest_runs_up_to_its_cap() -> None:
    catch_up = CatchUp.create(ALL, window_ms=3_600_000, max_runs=3)
    armed = runs.Armed(every(60_000, catch_up=catch_up), "v1", next_run_ms=T0)
    handoff = runs.hand_off(armed, now_ms=T0 + 3_600_000 + 1, horizon_ms=0)
    assert [run.run_ms for run in handoff.runs] == [T0 + k * 60_000 for k in (58, 59, 60)]
    assert handoff.skipped == 58


def test_a_long_outage_of_a_frequent_schedule_costs_few_steps() -> None:
    armed = runs.Armed(every(1_000), "v1", next_run_ms=T0)
    handoff = runs.hand_off(armed, now_ms=T0 + 86_400_000, horizon_ms=0, refill=False)
    assert [run.run_ms for run in handoff.runs] == [T0 + 86_399_000, T0 + 86_400_000]
    assert handoff.skipped == runs.MAX_COUNTED_MISSES - 1


def test_max_runs_start_and_end_bound_the_runs() -> None:
    bounded = every(1_000, start_ms=T0 + 3_000, end_ms=T0 + 10_000)
    handoff = runs.hand_off(runs.arm(bounded, "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    assert [run.run_ms for run in handoff.runs] == [T0 + k * 1_000 for k in range(3, 11)]
    assert handoff.armed.finished
    limited = every(1_000, max_runs=3)
    handoff = runs.hand_off(runs.arm(limited, "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    assert len(handoff.runs) == 3
    assert handoff.armed.finished
    # A finished schedule's timer is for forgetting it, a retention after its last run.
    assert runs.fire_at_ms(handoff.armed, HORIZON_MS) == T0 + 3_000 + runs.FINISHED_RETENTION_MS


def test_a_finished_schedule_that_never_ran_is_forgotten_a_retention_after_its_put() -> None:
    past = Schedule.create("t", "once", b"x", Times((T0 - 5_000,)), limits=Limits())
    armed = runs.arm(past, f"{T0}-0", T0)
    assert armed.finished
    assert runs.forget_at_ms(armed) == T0 + runs.FINISHED_RETENTION_MS
    assert runs.forget_at_ms(runs.arm(every(1_000), "v1", T0)) is None


def test_explicit_times_run_once_each() -> None:
    schedule = Schedule.create("t", "once", b"x", Times((T0 + 5_000, T0 + 1_000)), limits=Limits())
    handoff = runs.hand_off(runs.arm(schedule, "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    assert [run.run_ms for run in handoff.runs] == [T0 + 1_000, T0 + 5_000]
    assert handoff.armed.finished


def test_a_firing_hands_over_at_most_its_limit() -> None:
    handoff = runs.hand_off(
        runs.arm(every(1_000), "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS, limit=4
    )
    assert len(handoff.runs) == 4
    assert handoff.armed.next_run_ms == T0 + 5_000
    assert runs.fire_at_ms(handoff.armed, HORIZON_MS) < T0  # type: ignore[operator]


def test_putting_the_same_definition_again_changes_nothing() -> None:
    handed = runs.hand_off(runs.arm(every(1_000), "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    state, cancels = runs.put(handed.armed, every(1_000), "v2", T0 + 100)
    assert state is handed.armed
    assert cancels == []


def test_a_paused_schedule_stays_paused_when_its_definition_is_put_again() -> None:
    handed = runs.hand_off(runs.arm(every(1_000), "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    paused, _ = runs.pause(handed.armed, "v2", T0 + 100)
    state, cancels = runs.put(paused, every(1_000), "v3", T0 + 200)
    assert state is paused
    assert cancels == []
    # A put that says paused pauses an active schedule.
    state, cancels = runs.put(handed.armed, every(1_000, paused=True), "v4", T0 + 300)
    assert state.schedule.paused
    handed_s = (HORIZON_MS + runs.refill_ms(HORIZON_MS)) // 1_000
    assert [run.run_ms for run in cancels] == [T0 + k * 1_000 for k in range(1, handed_s + 1)]


def test_a_replace_cancels_the_runs_handed_over_and_not_due() -> None:
    handed = runs.hand_off(runs.arm(every(10_000), "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    state, cancels = runs.put(handed.armed, every(5_000), "v2", T0 + 25_000)
    assert cancels == [run for run in handed.runs if run.run_ms > T0 + 25_000]
    assert state.version == "v2"
    assert state.next_run_ms == T0 + 30_000
    assert state.runs == 0


def test_pause_cancels_and_resume_catches_up_under_a_new_version() -> None:
    schedule = every(10_000, catch_up=CatchUp.create(LATEST))
    handed = runs.hand_off(runs.arm(schedule, "v1", T0), now_ms=T0, horizon_ms=HORIZON_MS)
    paused, cancels = runs.pause(handed.armed, "v2", T0 + 15_000)
    handed_10s = (HORIZON_MS + runs.refill_ms(HORIZON_MS)) // 10_000
    assert [run.run_ms for run in cancels] == [T0 + k * 10_000 for k in range(2, handed_10s + 1)]
    assert paused.next_run_ms == T0 + 20_000
    assert runs.fire_at_ms(paused, HORIZON_MS) is None
    assert runs.hand_off(paused, now_ms=T0 + 50_000, horizon_ms=HORIZON_MS).runs == []
    resumed = runs.resume(paused, "v3")
    handoff = runs.hand_off(resumed, now_ms=T0 + 45_000, horizon_ms=0, refill=False)
    # The latest of the runs missed while paused (20, 30, 40 s), late, then none until 50 s.
    assert [run.run_ms for run in handoff.runs] == [T0 + 40_000]
    assert handoff.skipped == 2
    assert {run.id for run in handoff.runs}.isdisjoint(run.id for run in cancels)


def test_a_cron_in_a_zone_hands_over_its_runs() -> None:
    monday_9_paris = parse_cron("0 9 * * 1", "Europe/Paris")
    schedule = Schedule.create("reports", "weekly", b"x", monday_9_paris, limits=Limits())
    armed = runs.arm(schedule, "v1", T0)  # a Friday
    assert armed.next_run_ms == 1_800_259_200_000  # Monday 2027-01-18 09:00 CET = 08:00Z


@settings(max_examples=60, deadline=None)
@given(
    period_s=st.integers(1, 600),
    down_s=st.integers(0, 7_200),
    policy=st.sampled_from([SKIP, LATEST, ALL]),
)
def test_no_run_is_sent_twice_or_early_and_every_run_is_sent_or_skipped(
    period_s: int, down_s: int, policy: str
) -> None:
    schedule = every(period_s * 1_000, catch_up=CatchUp.create(policy, window_ms=600_000))
    armed = runs.arm(schedule, "v1", T0)
    sent: list[runs.Run] = []
    skipped = 0
    # Batches every 500 ms, a gap of down_s in the middle.
    now_ms = T0
    while now_ms < T0 + 2 * 3_600_000:
        handoff = runs.hand_off(armed, now_ms=now_ms, horizon_ms=2_000)
        assert all(run.run_ms >= armed.next_run_ms for run in handoff.runs)  # type: ignore[operator]
        sent += handoff.runs
        skipped += handoff.skipped
        armed = handoff.armed
        now_ms += 500 if now_ms != T0 + 1_800_000 else down_s * 1_000 + 500
    times = [run.run_ms for run in sent]
    assert times == sorted(set(times))
    assert len({run.id for run in sent}) == len(sent)
    last_ms = armed.next_run_ms
    assert last_ms is not None
    period_ms = period_s * 1_000
    # Every run of the epoch-anchored period after T0 and before the next one.
    assert len(sent) + skipped == last_ms // period_ms - 1 - T0 // period_ms
