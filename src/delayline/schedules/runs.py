"""A schedule in the wheel: its runs handed to the outbox one horizon ahead, the runs
it missed, and what a change cancels (pure).

The scheduler keeps one :class:`Armed` per schedule in its state and calls these
functions; each returns the new state and the runs to emit or to cancel, and
touches nothing else. The rules:

- **Runs are ordinary messages.** A run's id is derived from the schedule's
  address, its version (the inbound entry that last put, paused or resumed it)
  and the run's time (:func:`run_id`), so a replayed batch or a second scheduler
  makes the same id, and the sink writes it once.
- **One horizon ahead, one run armed.** The wheel holds each schedule's next
  run, not yet handed over (``next_run_ms``); the timer fires ``horizon_ms``
  before it, or up to half a horizon sooner (:func:`fire_at_ms`). Firing hands
  every run due within the horizon and half a horizon after it
  (:func:`refill_ms`) to the outbox, as one-shot messages due then would be,
  and arms the one after: the pump then delivers on time across a restart of
  Spark shorter than the horizon, and a schedule that runs every second fires
  once per half a horizon, not at every run.
- **Missed runs** are those the scheduler reaches only after their time
  (delayline was down for longer than the horizon, or the schedule was paused):
  the schedule's catch-up policy (:class:`~delayline.schedules.spec.CatchUp`)
  picks which are sent, late, with their own time in ``delayline-run-at``.
- **A change cancels what it replaces.** Putting a different definition,
  pausing or deleting cancels the runs already handed over and not yet due
  (:func:`handed_not_due`); putting the same definition again changes nothing
  (a paused schedule stays paused), so every instance of an application may put
  its schedules at start.
- **A new definition starts after the batch that reads it**: its first run is
  the first one after that batch's time.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import NamedTuple

from delayline import ids
from delayline.schedules.recurrence import runs_between
from delayline.schedules.spec import ALL, LATEST, Schedule
from delayline.timing import format_time

#: The header naming the schedule a run came from.
SCHEDULE_HEADER = "delayline-schedule"
#: The header holding a run's own time (RFC 3339, UTC), which a late run keeps.
RUN_AT_HEADER = "delayline-run-at"
#: The most runs one firing hands over; the rest go in the next batch.
MAX_RUNS_PER_FIRING = 1_000
#: Missed runs are counted up to this many (a skipped count above it means "at least").
MAX_COUNTED_MISSES = 10_000
#: How long a finished schedule (no run left) stays listed after its last run, or
#: after it was put if it never ran (ms): then the scheduler forgets it, so that
#: one-off schedules made without end do not pile up (7 days).
FINISHED_RETENTION_MS = 7 * 24 * 3_600_000
#: The most runs one look for missed runs reads (see :func:`last_runs`).
_MAX_SCANNED_RUNS = 100_000


class Run(NamedTuple):
    """One run of a schedule: its message id and time (epoch ms)."""

    id: str
    run_ms: int


@dataclass(frozen=True)
class Armed:
    """A schedule's state in the wheel.

    ``next_run_ms`` is its first run not yet handed over (None: it has no more);
    ``handed_until_ms`` the latest run handed over; ``runs`` how many were, for
    ``max_runs``; ``skipped`` how many missed runs the catch-up policy left out;
    ``counted_until_ms`` how far its runs are counted ahead in the forecast (see
    :mod:`delayline.schedules.ahead`; None: none are).
    """

    schedule: Schedule
    version: str
    next_run_ms: int | None
    handed_until_ms: int | None = None
    runs: int = 0
    skipped: int = 0
    counted_until_ms: int | None = None

    @property
    def finished(self) -> bool:
        """Whether the schedule has no run left."""
        return self.next_run_ms is None


def run_id(schedule: Schedule, version: str, run_ms: int) -> str:
    """The message id of the run at ``run_ms`` of ``schedule`` as ``version`` put it."""
    seed = "\0".join((schedule.topic, schedule.name, version)).encode()
    return ids.derived_message_id(run_ms, seed)


def run_headers(schedule: Schedule, run_ms: int) -> dict[str, str]:
    """A run's headers: the schedule's, plus its name and the run's time."""
    return {**schedule.headers, SCHEDULE_HEADER: schedule.name, RUN_AT_HEADER: format_time(run_ms)}


def next_run(schedule: Schedule, after_ms: int) -> int | None:
    """The schedule's first run strictly after ``after_ms``, within its start and end."""
    if schedule.start_ms is not None:
        after_ms = max(after_ms, schedule.start_ms - 1)
    run_ms = schedule.recurrence.next_after(after_ms)
    if run_ms is None or (schedule.end_ms is not None and run_ms > schedule.end_ms):
        return None
    return run_ms


def preview(schedule: Schedule, after_ms: int, n: int, *, runs_done: int = 0) -> list[int]:
    """The schedule's next ``n`` runs strictly after ``after_ms`` (epoch ms), in order:
    within its start and end, and no more than the ``max_runs - runs_done`` it has left
    (``runs_done``: runs already sent). Runs nothing; ``paused`` is not looked at."""
    left = n if schedule.max_runs is None else min(n, schedule.max_runs - runs_done)
    found: list[int] = []
    run_ms: int | None = after_ms
    while len(found) < left and run_ms is not None:
        run_ms = next_run(schedule, run_ms)
        if run_ms is not None:
            found.append(run_ms)
    return found


def runs_in(schedule: Schedule, after_ms: int, until_ms: int, limit: int) -> list[int]:
    """The schedule's runs r with ``after_ms < r <= until_ms``, the first ``limit``."""
    return [
        run_ms
        for run_ms in runs_between(schedule.recurrence, after_ms, until_ms, limit)
        if schedule.within_bounds(run_ms)
    ]


def last_runs(schedule: Schedule, *, from_ms: int, before_ms: int, count: int) -> list[int]:
    """The last ``count`` runs r with ``from_ms <= r < before_ms``, in order.

    Looks back over a window that doubles from a second until it holds
    ``count`` runs or reaches ``from_ms``, so that a long outage costs a few
    steps, not one per missed run.
    """
    width_ms = 1_000
    while True:
        low_ms = max(from_ms, before_ms - width_ms)
        found = runs_in(schedule, low_ms - 1, before_ms - 1, _MAX_SCANNED_RUNS)
        if len(found) >= count or low_ms == from_ms:
            return found[-count:] if count else []
        width_ms *= 2


def arm(schedule: Schedule, version: str, now_ms: int) -> Armed:
    """A new definition's state: its first run is its first one after ``now_ms``."""
    return Armed(schedule, version, next_run(schedule, now_ms))


def refill_ms(horizon_ms: int) -> int:
    """How long after the horizon a firing hands runs over too (ms): half of it. Each
    firing costs Spark's state calls whatever it hands over, so a schedule that runs
    more often fires once per half a horizon, not at every run; the outbox holds its
    runs of one and a half horizons at most."""
    return horizon_ms // 2


def fire_at_ms(armed: Armed, horizon_ms: int) -> int | None:
    """When the wheel should next look at the schedule (epoch ms): ``horizon_ms``
    before its next run, or sooner, at the last instant before that of the
    schedule's own phase (:func:`phase_ms`) in a cycle of :func:`refill_ms`; once
    finished, when it is to be forgotten; None while paused.

    The phase spreads firings: schedules put together, or crons due at the same
    second 0, would otherwise fire in the same batch, and a batch that hands tens
    of thousands of runs over at once holds the pump back."""
    if armed.next_run_ms is None:
        return forget_at_ms(armed)
    if armed.schedule.paused:
        return None
    deadline_ms = armed.next_run_ms - horizon_ms
    cycle_ms = refill_ms(horizon_ms)
    if cycle_ms <= 0:
        return deadline_ms
    return deadline_ms - (deadline_ms - phase_ms(armed.schedule, cycle_ms)) % cycle_ms


def phase_ms(schedule: Schedule, cycle_ms: int) -> int:
    """The schedule's phase in a cycle of ``cycle_ms`` (ms, from 0 to cycle_ms - 1): a
    hash of its address, the same in every process."""
    return zlib.crc32("\0".join(schedule.address).encode()) % cycle_ms


def forget_at_ms(armed: Armed) -> int | None:
    """When a finished schedule is forgotten (epoch ms): FINISHED_RETENTION_MS after its
    last run, or after the entry that put it if it never ran; None if not finished."""
    if armed.next_run_ms is not None:
        return None
    since_ms = armed.handed_until_ms
    if since_ms is None:
        since_ms = int(armed.version.split("-", 1)[0])
    return since_ms + FINISHED_RETENTION_MS


@dataclass(frozen=True)
class Handoff:
    """A firing: the new state, the runs to send (in order), how many were skipped."""

    armed: Armed
    runs: list[Run]
    skipped: int


def hand_off(
    armed: Armed,
    *,
    now_ms: int,
    horizon_ms: int,
    refill: bool = True,
    limit: int = MAX_RUNS_PER_FIRING,
) -> Handoff:
    """Hand over the runs due by ``now_ms + horizon_ms`` and, with ``refill``, the
    :func:`refill_ms` after it (at most ``limit``), after the missed ones the catch-up
    policy keeps; arm the next."""
    schedule = armed.schedule
    if schedule.paused or armed.next_run_ms is None:
        return Handoff(armed, [], 0)
    chosen: list[int] = []
    skipped = 0
    upcoming: int | None = armed.next_run_ms
    if armed.next_run_ms < now_ms:
        chosen, skipped = catch_up(schedule, first_ms=armed.next_run_ms, now_ms=now_ms)
        upcoming = next_run(schedule, now_ms - 1)
    until_ms = now_ms + horizon_ms + (refill_ms(horizon_ms) if refill else 0)
    while upcoming is not None and upcoming <= until_ms and len(chosen) < limit:
        chosen.append(upcoming)
        upcoming = next_run(schedule, upcoming)
    if schedule.max_runs is not None and armed.runs + len(chosen) >= schedule.max_runs:
        chosen = chosen[: schedule.max_runs - armed.runs]
        upcoming = None
    state = replace(
        armed,
        next_run_ms=upcoming,
        handed_until_ms=chosen[-1] if chosen else armed.handed_until_ms,
        runs=armed.runs + len(chosen),
        skipped=armed.skipped + skipped,
    )
    return Handoff(state, [Run(run_id(schedule, armed.version, r), r) for r in chosen], skipped)


def catch_up(schedule: Schedule, *, first_ms: int, now_ms: int) -> tuple[list[int], int]:
    """The missed runs (from ``first_ms`` to before ``now_ms``) the policy sends, and
    how many it skips (counted up to MAX_COUNTED_MISSES)."""
    policy = schedule.catch_up
    if policy.policy == LATEST:
        chosen = last_runs(schedule, from_ms=first_ms, before_ms=now_ms, count=1)
    elif policy.policy == ALL:
        since_ms = max(first_ms, now_ms - policy.window_ms)
        chosen = last_runs(schedule, from_ms=since_ms, before_ms=now_ms, count=policy.max_runs)
    else:
        chosen = []
    missed = len(runs_in(schedule, first_ms - 1, now_ms - 1, MAX_COUNTED_MISSES))
    return chosen, max(missed - len(chosen), 0)


def handed_not_due(armed: Armed, now_ms: int) -> list[Run]:
    """The runs handed over whose time is after ``now_ms``: what a change cancels."""
    if armed.handed_until_ms is None or armed.handed_until_ms <= now_ms:
        return []
    schedule = armed.schedule
    return [
        Run(run_id(schedule, armed.version, r), r)
        for r in runs_in(schedule, now_ms, armed.handed_until_ms, MAX_RUNS_PER_FIRING)
    ]


def put(
    old: Armed | None, schedule: Schedule, version: str, now_ms: int
) -> tuple[Armed, list[Run]]:
    """Put a definition: the new state, and the old runs to cancel.

    The same definition again changes nothing, whether it is paused or not: a
    schedule paused by :func:`pause` stays paused when an application puts it
    again at its start, until :func:`resume`; a put with ``paused`` set pauses it.
    """
    if old is not None and replace(old.schedule, paused=False) == replace(schedule, paused=False):
        return pause(old, version, now_ms) if schedule.paused else (old, [])
    cancels = handed_not_due(old, now_ms) if old is not None else []
    return arm(schedule, version, now_ms), cancels


def pause(old: Armed, version: str, now_ms: int) -> tuple[Armed, list[Run]]:
    """Pause: cancel what was handed over and not due; the first run not sent stays
    next, so that resuming finds the runs missed meanwhile."""
    if old.schedule.paused:
        return old, []
    cancels = handed_not_due(old, now_ms)
    state = replace(
        old,
        schedule=replace(old.schedule, paused=True),
        version=version,
        next_run_ms=cancels[0].run_ms if cancels else old.next_run_ms,
        handed_until_ms=now_ms if cancels else old.handed_until_ms,
        runs=old.runs - len(cancels),
    )
    return state, cancels


def resume(old: Armed, version: str) -> Armed:
    """Resume: the runs missed while paused follow the catch-up policy at the next
    firing, under a new version (so their ids differ from the cancelled ones)."""
    if not old.schedule.paused:
        return old
    return replace(old, schedule=replace(old.schedule, paused=False), version=version)
