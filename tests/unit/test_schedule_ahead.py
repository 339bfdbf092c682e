"""A schedule's runs counted ahead in the forecast: a key's firings, simulated with the
forecast accounting the sink does (lua/write_chunk.lua, lua/pump.lua), leave every
minute's count equal to its runs in the outbox plus its runs still to come within
the window, through changes, pauses, outages and caps."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delayline.scheduler.jobs.drain import drained_put
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.schedule_keys import fire
from delayline.schedules import ahead, ops, runs, state
from delayline.schedules.recurrence import Every, parse_cron
from delayline.schedules.spec import CatchUp, Schedule
from delayline.validation import Limits

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000  # on a whole hour
HORIZON_MS = 60_000
MINUTE_MS = ahead.MINUTE_MS


def minute(run_ms: int) -> int:
    return run_ms // MINUTE_MS * MINUTE_MS


def every(period_ms: int, anchor_ms: int = 0, **options: Any) -> Schedule:
    return Schedule.create("t", "s", b"x", Every(period_ms, anchor_ms), limits=Limits(), **options)


@dataclass
class Wheel:
    """One schedule key and the forecast counts the sink keeps for its records."""

    now_ms: int = T0
    horizon_ms: int = HORIZON_MS
    stored: bytes = b""
    fire_at_ms: int | None = None
    forecast: Counter[int] = field(default_factory=Counter)
    outbox: dict[str, int] = field(default_factory=dict)
    sequence: int = 0
    #: How many runs each firing handed over.
    firings: list[int] = field(default_factory=list)

    def op(
        self,
        action: str,
        definition: Schedule | None = None,
        counted: tuple[int, int] | None = None,
    ) -> None:
        self.sequence += 1
        record = packs.Record(
            kind=packs.SCHEDULE,
            deliver_at_ms=self.now_ms,
            id="",
            inbound_id=f"{self.now_ms}-{self.sequence}",
            topic="t",
            body=b"" if definition is None else definition.to_json().encode(),
            key="s",
            headers="" if counted is None else ops.encode_counted(counted),
            reason=action,
        )
        self._fire(packs.pack([record]))

    def run_until(self, until_ms: int) -> None:
        """Fire at every timer up to ``until_ms``, as the wheel would, then stop there."""
        while self.fire_at_ms is not None and self.fire_at_ms <= until_ms:
            self.now_ms = max(self.now_ms, self.fire_at_ms)
            self._fire(b"")
        self.now_ms = until_ms
        self._deliver()

    def _deliver(self) -> None:
        for run_id, run_ms in list(self.outbox.items()):
            if run_ms <= self.now_ms:
                del self.outbox[run_id]
                self.forecast[minute(run_ms)] -= 1

    def _fire(self, incoming: bytes) -> None:
        self._deliver()
        firing = fire(self.stored, incoming, now_ms=self.now_ms, horizon_ms=self.horizon_ms)
        self.stored, self.fire_at_ms = firing.stored, firing.fire_at_ms
        handed = [r for r in packs.unpack(firing.out) if r.kind in (packs.RUN, packs.COUNTED_RUN)]
        self.firings.append(len(handed))
        if self.fire_at_ms is not None and self.fire_at_ms <= self.now_ms:
            # Only a firing that handed over its most runs calls for the next batch at once.
            assert self.armed is not None
            assert self.fire_at_ms == runs.fire_at_ms(self.armed, self.horizon_ms)
        for record in packs.unpack(firing.out):
            if record.kind == packs.RUN:
                self.forecast[minute(record.deliver_at_ms)] += 1
            if record.kind in (packs.RUN, packs.COUNTED_RUN):
                assert record.id not in self.outbox
                self.outbox[record.id] = record.deliver_at_ms
            elif record.kind == packs.FORECAST:
                self.forecast[record.deliver_at_ms] += record.attempt
            elif record.kind == packs.REVOKE and record.id in self.outbox:
                self.forecast[minute(self.outbox.pop(record.id))] -= 1

    @property
    def armed(self) -> runs.Armed | None:
        [armed] = state.decode(self.stored) or [None]
        return armed

    def check(self) -> None:
        """Every minute counts the runs waiting in the outbox and those to come within the
        window, each once; none counts below zero."""
        armed = self.armed
        to_come = ahead.counted(armed) if armed is not None else []
        expected = Counter(minute(r) for r in [*self.outbox.values(), *to_come])
        assert +self.forecast == expected
        assert all(count >= 0 for count in self.forecast.values())
        if armed is not None and not armed.schedule.paused and armed.next_run_ms is not None:
            # The window is complete: every run up to the hour ahead is counted.
            within = runs.preview(
                armed.schedule, armed.next_run_ms - 1, 5_000, runs_done=armed.runs
            )
            end_ms = self.now_ms + ahead.FORECAST_AHEAD_MS
            assert to_come[: len(to_come)] == [r for r in within if r <= armed.counted_until_ms]
            assert all(r in to_come for r in within if r <= end_ms)


def test_an_every_second_schedule_counts_the_next_hour_minute_by_minute() -> None:
    wheel = Wheel()
    wheel.op(ops.PUT, every(1_000))
    wheel.check()
    # The next hour and the horizon to the end of its minute: 60 runs a minute.
    assert wheel.forecast[T0 + 30 * MINUTE_MS] == 60
    assert wheel.forecast[T0 + 61 * MINUTE_MS] == 60
    assert wheel.forecast[T0 + 62 * MINUTE_MS] == 0
    for step in range(1, 40):
        wheel.run_until(T0 + step * 7_000)
        wheel.check()
    assert wheel.forecast[minute(wheel.now_ms) + 61 * MINUTE_MS] == 60


def test_a_replace_a_pause_and_a_delete_take_their_counts_back() -> None:
    wheel = Wheel()
    wheel.op(ops.PUT, every(1_000))
    wheel.run_until(T0 + 90_000)
    wheel.op(ops.PUT, every(10_000))
    wheel.check()
    assert wheel.forecast[minute(wheel.now_ms) + 30 * MINUTE_MS] == 6
    wheel.run_until(T0 + 200_000)
    wheel.op(ops.PAUSE)
    wheel.check()
    assert +wheel.forecast == Counter()
    wheel.run_until(T0 + 400_000)
    wheel.op(ops.RESUME)
    wheel.check()
    wheel.run_until(T0 + 500_000)
    wheel.check()
    wheel.op(ops.DELETE)
    wheel.check()
    assert +wheel.forecast == Counter()


@pytest.mark.parametrize("policy", ["skip", "latest", "all"])
def test_runs_missed_in_an_outage_leave_the_forecast(policy: str) -> None:
    wheel = Wheel()
    wheel.op(ops.PUT, every(5_000, catch_up=CatchUp(policy)))
    wheel.run_until(T0 + 120_000)
    # Down for 40 minutes: the wheel fires again only then.
    wheel.now_ms = T0 + 40 * MINUTE_MS
    wheel.run_until(wheel.now_ms)
    wheel._fire(b"")
    wheel.check()
    assert all(run_ms >= T0 + 120_000 for run_ms in wheel.outbox.values())


def test_max_runs_bounds_what_is_counted() -> None:
    wheel = Wheel()
    wheel.op(ops.PUT, every(1_000, max_runs=5_000))
    # The runs after T0 up to the end of the minute an hour and the horizon on.
    assert sum(wheel.forecast.values()) == 59 + 61 * 60
    wheel = Wheel()
    wheel.op(ops.PUT, every(10_000, max_runs=500))
    for until_ms in (T0 + 30 * MINUTE_MS, T0 + 50 * MINUTE_MS, T0 + 90 * MINUTE_MS):
        wheel.run_until(until_ms)
        wheel.check()
        armed = wheel.armed
        assert armed is not None
        # The window holds more than the runs left: all of them are counted, no more.
        assert armed.runs + len(ahead.counted(armed)) == 500


def test_a_daily_cron_is_counted_once_its_run_is_within_the_hour() -> None:
    cron = Schedule.create("t", "s", b"x", parse_cron("30 10 * * *", "UTC"), limits=Limits())
    wheel = Wheel()
    wheel.op(ops.PUT, cron)  # T0 is 08:00 UTC: the run at 10:30 is beyond the hour
    wheel.check()
    assert +wheel.forecast == Counter()
    wheel.run_until(T0 + 90 * MINUTE_MS)
    wheel.check()
    assert +wheel.forecast == Counter({T0 + 150 * MINUTE_MS: 1})


@pytest.mark.parametrize("period_s", [60, 900, 3_600])
def test_a_schedule_that_runs_hourly_or_more_fires_only_to_hand_runs_over(period_s: int) -> None:
    # Off the minute, as most are: a firing counting ahead at the minute its next
    # uncounted run entered the window came once more each run, all at second 0.
    anchor_ms = 1_234_567
    wheel = Wheel()
    wheel.op(ops.PUT, every(period_s * 1_000, anchor_ms=anchor_ms))
    wheel.firings.clear()
    wheel.run_until(T0 + 5 * 3_600_000)
    wheel.check()
    # Five hours of runs: each firing handed some over.
    assert len(wheel.firings) >= 5 * 3_600 // period_s // 2
    assert all(wheel.firings)


@settings(max_examples=40, deadline=None)
@given(
    period_s=st.sampled_from([7, 60, 600, 3_600]),
    horizon_ms=st.sampled_from([3_000, 60_000, 7_200_000]),
    steps=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=2 * 3_600_000),
            st.sampled_from(["wait", ops.PUT, ops.PAUSE, ops.RESUME, ops.DELETE, "outage"]),
        ),
        max_size=12,
    ),
)
def test_the_counts_hold_through_any_sequence(
    period_s: int, horizon_ms: int, steps: list[tuple[int, str]]
) -> None:
    wheel = Wheel(horizon_ms=horizon_ms)
    wheel.op(ops.PUT, every(period_s * 1_000))
    for wait_ms, action in steps:
        if action == "outage":
            wheel.now_ms += wait_ms
            wheel._fire(b"")
        else:
            wheel.run_until(wheel.now_ms + wait_ms)
            if action != "wait":
                period_ms = period_s * 1_000 * (2 if wheel.sequence % 2 else 1)
                wheel.op(action, every(period_ms) if action == ops.PUT else None)
        wheel.check()


def test_a_drained_put_takes_back_what_the_old_checkpoint_counted() -> None:
    old = Wheel()
    old.op(ops.PUT, every(1_000))
    old.run_until(T0 + 90_000)
    armed = old.armed
    assert armed is not None
    drained = drained_put(armed, old.now_ms)
    assert drained.counted == (armed.next_run_ms, ahead.counted(armed)[-1])
    # The new checkpoint starts empty, 20 s later; the outbox and the forecast stay.
    new = Wheel(now_ms=old.now_ms + 20_000, forecast=old.forecast, outbox=old.outbox)
    new._deliver()
    new.op(ops.PUT, drained.definition, drained.counted)
    new.check()
