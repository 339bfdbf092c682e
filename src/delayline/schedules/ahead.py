"""A schedule's runs counted ahead in the forecast (pure).

The forecast counts a one-shot message from its send on, but a schedule's run is
a message only once it is handed to the outbox, one horizon ahead. So that the
forecast shows runs before that, each schedule counts its runs due within the
next FORECAST_AHEAD_MS and the horizon (to the end of a minute) into the
forecast's minute counters: its *counted* runs are those from its next run not handed over
(``Armed.next_run_ms``) to ``Armed.counted_until_ms``, within its start, end and
``max_runs``. Each firing moves that window on and tells the sink each minute's
change (a :class:`MinuteDelta`); a run handed over that was counted ahead is
marked so, and the sink does not count it again. A change, a pause or a deletion
takes back what the old state counted, and so do missed runs that the catch-up
policy leaves out.

Counted runs are in the minute counts only: a run shows among the forecast's
hot instants (its seconds) once it is handed to the outbox.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import NamedTuple

from delayline.schedules import runs
from delayline.schedules.runs import Armed, runs_in
from delayline.schedules.spec import Schedule

#: How far ahead a schedule's runs are counted in the forecast (ms; to the end of the
#: minute this far from the firing).
FORECAST_AHEAD_MS = 3_600_000
MINUTE_MS = 60_000
#: More runs than a schedule can have counted: runs are at least 1 s apart (1,000
#: explicit times at most), and the window is an hour and a minute.
_MAX_COUNTED = 4_000


class MinuteDelta(NamedTuple):
    """A change of the forecast's count of a schedule's topic in the minute starting at
    ``minute_ms`` (epoch ms)."""

    minute_ms: int
    delta: int


class Recount(NamedTuple):
    """A firing's count: the new state, which of the runs it handed over were counted
    ahead already (run times, epoch ms), and the forecast's changes."""

    armed: Armed
    counted_handed: frozenset[int]
    deltas: list[MinuteDelta]


def window_end_ms(now_ms: int, horizon_ms: int) -> int:
    """The last instant counted ahead at ``now_ms`` (epoch ms): the end of the minute
    FORECAST_AHEAD_MS and ``horizon_ms`` later. With the horizon in it, a firing (a
    horizon before a run) counts the runs up to an hour after that run: a schedule that
    runs at least hourly needs no other firing to keep the hour ahead counted."""
    return ((now_ms + horizon_ms + FORECAST_AHEAD_MS) // MINUTE_MS + 1) * MINUTE_MS - 1


def counted(armed: Armed) -> list[int]:
    """The runs ``armed`` has counted in the forecast (epoch ms, in order)."""
    return counted_between(armed, armed.next_run_ms, armed.counted_until_ms)


def counted_between(armed: Armed, from_ms: int | None, until_ms: int | None) -> list[int]:
    """The schedule's runs r with ``from_ms <= r <= until_ms``, no more than the
    ``max_runs`` it has left (none if either bound is None)."""
    if from_ms is None or until_ms is None:
        return []
    return runs_in(armed.schedule, from_ms - 1, until_ms, _left(armed))


def deltas(added: Iterable[int], removed: Iterable[int]) -> list[MinuteDelta]:
    """Each minute's change when runs ``added`` are counted and ``removed`` are not."""
    change: Counter[int] = Counter(run_ms // MINUTE_MS * MINUTE_MS for run_ms in added)
    change.subtract(run_ms // MINUTE_MS * MINUTE_MS for run_ms in removed)
    return [MinuteDelta(minute_ms, delta) for minute_ms, delta in sorted(change.items()) if delta]


def forget(armed: Armed) -> list[MinuteDelta]:
    """The forecast's changes that take back what ``armed`` counted (its definition
    changed, it was paused or deleted); the state that follows counts from None."""
    return deltas([], counted(armed))


def carried(schedule: Schedule, counted_ms: tuple[int, int]) -> list[MinuteDelta]:
    """The forecast's changes that take back the runs of ``schedule`` that a drained
    checkpoint counted, from and until ``counted_ms`` (epoch ms, both included)."""
    from_ms, until_ms = counted_ms
    return deltas([], runs_in(schedule, from_ms - 1, until_ms, _MAX_COUNTED))


def recount(
    before: Armed, after: Armed, handed: Sequence[int], *, now_ms: int, horizon_ms: int
) -> Recount:
    """Move the counted window on after a firing at ``now_ms`` that went from state
    ``before`` to ``after`` and handed the runs at ``handed`` (epoch ms) over."""
    until_ms = None
    if not after.schedule.paused and after.next_run_ms is not None:
        until_ms = window_end_ms(now_ms, horizon_ms)
    old_until_ms = before.counted_until_ms
    if (
        until_ms is not None
        and old_until_ms is not None
        and before.next_run_ms is not None
        and before.next_run_ms >= now_ms  # nothing missed: the handed runs were the first
        and not _capped(after)
    ):
        was_counted = frozenset(run_ms for run_ms in handed if run_ms <= old_until_ms)
        if until_ms <= old_until_ms:
            return Recount(replace(after, counted_until_ms=old_until_ms), was_counted, [])
        assert after.next_run_ms is not None  # until_ms is not None
        added = counted_between(after, max(old_until_ms + 1, after.next_run_ms), until_ms)
        return Recount(replace(after, counted_until_ms=until_ms), was_counted, deltas(added, []))
    # A first count, missed runs, a cap near: compare the counted runs in full.
    old = counted(before)
    was_counted = frozenset(handed).intersection(old)
    new = counted_between(after, after.next_run_ms, until_ms)
    left_over = [run_ms for run_ms in old if run_ms not in was_counted]
    return Recount(replace(after, counted_until_ms=until_ms), was_counted, deltas(new, left_over))


def fire_at_ms(armed: Armed, horizon_ms: int) -> int | None:
    """When the wheel should next look at the schedule (epoch ms): as
    :func:`runs.fire_at_ms <delayline.schedules.runs.fire_at_ms>` says, or sooner, when
    its first run not counted yet comes within FORECAST_AHEAD_MS (a schedule whose
    runs are more than about an hour apart).

    Not at the minute that run enters the window: a firing that hands runs over
    comes first for a schedule that runs at least hourly, and one at the run's own
    second spreads the others' firings over the minute."""
    at_ms = runs.fire_at_ms(armed, horizon_ms)
    if at_ms is None or armed.schedule.paused or armed.counted_until_ms is None:
        return at_ms
    if _capped(armed) and len(counted(armed)) >= _left(armed):
        return at_ms  # every run it has left is counted
    after_ms = max(armed.counted_until_ms, (armed.next_run_ms or 0) - 1)
    uncounted_ms = runs.next_run(armed.schedule, after_ms)
    if uncounted_ms is None:
        return at_ms
    # The last instant that counts it in time: window_end_ms reaches it then, since
    # the window is FORECAST_AHEAD_MS and more.
    return min(at_ms, uncounted_ms - FORECAST_AHEAD_MS)


def _left(armed: Armed) -> int:
    """How many runs it may have counted: its ``max_runs`` left, or more than it can."""
    max_runs = armed.schedule.max_runs
    return _MAX_COUNTED if max_runs is None else max(min(_MAX_COUNTED, max_runs - armed.runs), 0)


def _capped(armed: Armed) -> bool:
    """Whether its ``max_runs`` may end the runs within the window."""
    max_runs = armed.schedule.max_runs
    return max_runs is not None and max_runs - armed.runs <= _MAX_COUNTED
