"""Schedules in the wheel processor under TwsTester: a put arms a key of its own, its
timer hands each run over a horizon ahead, and a change revokes what it replaces."""

from __future__ import annotations

import json

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline import timing
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.pipeline.records import to_packed
from delayline.schedules.ops import DELETE, PAUSE, PUT, RESUME, ScheduleOp, schedule_key
from delayline.schedules.recurrence import Every
from delayline.schedules.spec import CatchUp, Schedule
from delayline.validation import Limits

HORIZON_MS = 3_000
T0 = 1_800_000_000_000
TOPIC, NAME = "reports", "tick"


class Wheel:
    """A processor under test, fed schedule ops."""

    def __init__(self) -> None:
        self.wakeups: list[int] = []
        processor = WheelProcessor(HORIZON_MS, 60_000, timing.Wheel(), self.wakeups.extend)
        self.processor = processor
        self.tester = TwsTester(processor, timeMode="ProcessingTime")
        self.tester.setProcessingTime(T0)
        self.clock_ms = T0
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


def times_of(records: list[packs.Record], kind: int) -> list[int]:
    return [record.deliver_at_ms for record in records if record.kind == kind]


def test_a_put_hands_over_the_runs_within_the_horizon_and_its_timer_the_rest() -> None:
    wheel = Wheel()
    out = wheel.op(PUT, every_second(headers={"team": "a"}))
    assert times_of(out, packs.RUN) == [T0 + 1_000, T0 + 2_000, T0 + 3_000]
    run = out[0]
    assert (run.topic, run.body, run.attempt) == (TOPIC, b"run", 1)
    assert json.loads(run.headers) == {
        "team": "a",
        "delayline-schedule": NAME,
        "delayline-run-at": timing.format_time(T0 + 1_000),
    }
    wheel.processor.close()
    assert wheel.wakeups == [T0 + 4_000 - HORIZON_MS]
    assert wheel.advance_to(T0 + 999) == []
    assert times_of(wheel.advance_to(T0 + 1_000), packs.RUN) == [T0 + 4_000]
    # The same definition put again changes nothing.
    assert wheel.op(PUT, every_second(headers={"team": "a"}), at_ms=T0 + 1_100) == []


def test_pause_revokes_the_runs_not_due_and_resume_catches_up() -> None:
    wheel = Wheel()
    handed = wheel.op(PUT, every_second(catch_up=CatchUp.create("latest")))
    paused = wheel.op(PAUSE, at_ms=T0 + 1_500)  # after the timer at 1 s handed 4 s over
    handed += [record for record in paused if record.kind == packs.RUN]
    revoked = [record for record in paused if record.kind == packs.REVOKE]
    assert [r.deliver_at_ms for r in revoked] == [T0 + 2_000, T0 + 3_000, T0 + 4_000]
    assert {r.id for r in revoked} <= {r.id for r in handed}
    assert wheel.advance_to(T0 + 9_000) == []  # nothing while paused
    resumed = wheel.op(RESUME, at_ms=T0 + 9_500)
    # The latest missed run (9 s), late, then the runs within the horizon.
    assert times_of(resumed, packs.RUN) == [T0 + 9_000, T0 + 10_000, T0 + 11_000, T0 + 12_000]


def test_delete_revokes_and_forgets_the_schedule() -> None:
    wheel = Wheel()
    wheel.op(PUT, every_second())
    out = wheel.op(DELETE, at_ms=T0 + 500)
    assert times_of(out, packs.REVOKE) == [T0 + 1_000, T0 + 2_000, T0 + 3_000]
    assert times_of(out, packs.RUN) == []
    assert wheel.advance_to(T0 + 60_000) == []
    # An op on a schedule that is gone does nothing.
    assert wheel.op(PAUSE, at_ms=T0 + 60_000) == []
