"""Schedules in the wheel processor under TwsTester: a put arms a key of its own, its
timer hands each run over a horizon ahead, and a change revokes what it replaces."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline import timing
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.pipeline.records import to_packed
from delayline.schedules.ops import DELETE, PAUSE, PUT, RESUME, ScheduleOp, schedule_key
from delayline.schedules.recurrence import Every, Times, parse_cron
from delayline.schedules.runs import FINISHED_RETENTION_MS, refill_ms
from delayline.schedules.spec import CatchUp, Schedule
from delayline.validation import Limits

HORIZON_MS = 3_000
T0 = 1_800_000_000_000
TOPIC, NAME = "reports", "tick"
#: How far ahead a firing hands runs over (ms).
AHEAD_MS = HORIZON_MS + refill_ms(HORIZON_MS)
#: The last run of an every-second schedule that a firing at T0 hands over (s after T0).
AHEAD_S = AHEAD_MS // 1_000


def seconds(first: int, last: int) -> list[int]:
    """The whole seconds from T0 + ``first`` s to T0 + ``last`` s, as epoch ms."""
    return [T0 + k * 1_000 for k in range(first, last + 1)]


class Wheel:
    """A processor under test, fed schedule ops."""

    def __init__(self, start_ms: int = T0) -> None:
        self.wakeups: list[int] = []
        processor = WheelProcessor(HORIZON_MS, 60_000, timing.Wheel(), self.wakeups.extend)
        self.processor = processor
        self.tester = TwsTester(processor, timeMode="ProcessingTime")
        self.tester.setProcessingTime(start_ms)
        self.clock_ms = start_ms
        self._entries = 0

    def op(
        self, action: str, definition: Schedule | None = None, at_ms: int = T0
    ) -> list[packs.Record]:
        """A batch at ``at_ms`` reading one op written then: what expired timers emitted
        first, then what the op did."""
        fired = self.advance_to(at_ms) if at_ms > self.clock_ms else []
        self._entries += 1
        record = ScheduleOp(action, TOPIC, NAME, at_ms, definition).to_record()
        [(key, data)] = to_packed(
            f"{at_ms}-{self._entries}", record, limits=Limits(), wheel=timing.Wheel(), shards=1
        )
        assert key == schedule_key(TOPIC, NAME)
        return fired + emitted(self.tester.test(key, [Row(wheel_key=key, pack=data)]))

    def advance_to(self, now_ms: int) -> list[packs.Record]:
        """Move processing time forward; what expired timers emitted."""
        self.clock_ms = now_ms
        return emitted(self.tester.setProcessingTime(now_ms))


def emitted(rows: list[Row]) -> list[packs.Record]:
    return [record for row in rows for record in packs.unpack(row.pack)]


def every_second(**options: object) -> Schedule:
    return Schedule.create(TOPIC, NAME, b"run", Every(1_000), limits=Limits(), **options)  # type: ignore[arg-type]


#: A run handed over: COUNTED_RUN once its schedule counted it ahead in the forecast.
RUNS = (packs.RUN, packs.COUNTED_RUN)


def run_times(records: list[packs.Record]) -> list[int]:
    return [record.deliver_at_ms for record in records if record.kind in RUNS]


def test_a_put_hands_over_the_runs_within_the_horizon_and_its_timer_the_rest() -> None:
    wheel = Wheel()
    out = wheel.op(PUT, every_second(headers={"team": "a"}))
    # Those within the horizon, and the refill's after it.
    assert run_times(out) == seconds(1, AHEAD_S)
    run = out[0]
    assert (run.topic, run.body, run.attempt) == (TOPIC, b"run", 1)
    assert json.loads(run.headers) == {
        "team": "a",
        "delayline-schedule": NAME,
        "delayline-run-at": timing.format_time(T0 + 1_000),
    }
    wheel.processor.close()
    # The timer fires a horizon before the first run not handed over, or up to half
    # a horizon sooner, at the schedule's phase.
    [fire_at_ms] = wheel.wakeups
    deadline_ms = T0 + (AHEAD_S + 1) * 1_000 - HORIZON_MS
    assert deadline_ms - refill_ms(HORIZON_MS) < fire_at_ms <= deadline_ms
    assert wheel.advance_to(fire_at_ms - 1) == []
    refilled = run_times(wheel.advance_to(fire_at_ms))
    assert refilled == seconds(AHEAD_S + 1, (fire_at_ms - T0 + AHEAD_MS) // 1_000)
    # The same definition put again changes nothing.
    assert wheel.op(PUT, every_second(headers={"team": "a"}), at_ms=T0 + 1_100) == []


def test_pause_revokes_the_runs_not_due_and_resume_catches_up() -> None:
    wheel = Wheel()
    handed = wheel.op(PUT, every_second(catch_up=CatchUp.create("latest")))
    paused = wheel.op(PAUSE, at_ms=T0 + 1_500)
    handed += [record for record in paused if record.kind in RUNS]
    revoked = [record for record in paused if record.kind == packs.REVOKE]
    # Every run handed over (by the put, and by a timer before the pause) not due yet.
    assert [r.deliver_at_ms for r in revoked] == [t for t in run_times(handed) if t > T0 + 1_500]
    assert [r.deliver_at_ms for r in revoked][: AHEAD_S - 1] == seconds(2, AHEAD_S)
    assert {r.id for r in revoked} <= {r.id for r in handed}
    assert wheel.advance_to(T0 + 9_000) == []  # nothing while paused
    resumed = wheel.op(RESUME, at_ms=T0 + 9_500)
    # The latest missed run (9 s), late, then the runs within the horizon and the refill.
    assert run_times(resumed) == [T0 + 9_000, *seconds(10, (9_500 + AHEAD_MS) // 1_000)]


def test_delete_revokes_and_forgets_the_schedule() -> None:
    wheel = Wheel()
    wheel.op(PUT, every_second())
    out = wheel.op(DELETE, at_ms=T0 + 500)
    revoked = [r.deliver_at_ms for r in out if r.kind == packs.REVOKE]
    assert revoked == seconds(1, AHEAD_S)
    assert run_times(out) == []
    # What it counted ahead in the forecast is taken back.
    assert sum(r.attempt for r in out if r.kind == packs.FORECAST) < 0
    assert wheel.advance_to(T0 + 60_000) == []
    # An op on a schedule that is gone does nothing.
    assert wheel.op(PAUSE, at_ms=T0 + 60_000) == []


def runs_until(wheel: Wheel, until_ms: int) -> list[int]:
    """Drive the wheel as the source would, from one recorded wakeup to the next, until
    ``until_ms``; the times of the runs handed over meanwhile."""
    handed: list[int] = []
    while True:
        wheel.processor.close()  # records the timers set since the last call
        upcoming = [at for at in wheel.wakeups if at > wheel.clock_ms]
        if not upcoming or min(upcoming) > until_ms:
            return handed
        handed += run_times(wheel.advance_to(min(upcoming)))


def utc_ms(text: str) -> int:
    return timing.to_epoch_ms(datetime.fromisoformat(text))


@pytest.mark.parametrize(
    ("cron", "start", "until", "expected"),
    [
        # Spring, 2027-03-28: 02:00 CET becomes 03:00 CEST. A set hour in the gap runs
        # once at its end; an hourly cron skips the hour that does not exist.
        (
            "30 2 * * *",
            "2027-03-27T00:00:00Z",
            "2027-03-29T12:00:00Z",
            ["2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"],
        ),
        (
            "0 * * * *",
            "2027-03-28T00:30:00Z",
            "2027-03-28T02:30:00Z",
            ["2027-03-28T01:00:00Z", "2027-03-28T02:00:00Z"],
        ),
        # Autumn, 2027-10-31: 03:00 CEST becomes 02:00 CET. A set hour in the repeated
        # hour runs once, in its first pass; an hourly cron runs in both passes.
        (
            "30 2 * * *",
            "2027-10-30T00:00:00Z",
            "2027-11-01T12:00:00Z",
            ["2027-10-30T00:30:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"],
        ),
        (
            "0 * * * *",
            "2027-10-30T23:30:00Z",
            "2027-10-31T02:30:00Z",
            ["2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z", "2027-10-31T02:00:00Z"],
        ),
    ],
)
def test_a_cron_in_paris_across_the_changes_of_time(
    cron: str, start: str, until: str, expected: list[str]
) -> None:
    wheel = Wheel(start_ms=utc_ms(start))
    paris = Schedule.create(TOPIC, NAME, b"x", parse_cron(cron, "Europe/Paris"), limits=Limits())
    handed = run_times(wheel.op(PUT, paris, at_ms=wheel.clock_ms))
    handed += runs_until(wheel, utc_ms(until))
    assert handed == [utc_ms(text) for text in expected]


def test_a_finished_schedule_is_forgotten_a_retention_after_its_last_run() -> None:
    wheel = Wheel()
    once = Schedule.create(TOPIC, NAME, b"x", Times((T0 + 2_000,)), limits=Limits())
    assert run_times(wheel.op(PUT, once)) == [T0 + 2_000]
    key = schedule_key(TOPIC, NAME)
    assert wheel.tester.peekListState("entries", key) != []  # still listed, finished
    forget_ms = T0 + 2_000 + FINISHED_RETENTION_MS
    assert wheel.advance_to(forget_ms - 1) == []
    assert wheel.tester.peekListState("entries", key) != []
    assert wheel.advance_to(forget_ms) == []
    assert wheel.tester.peekListState("entries", key) == []
