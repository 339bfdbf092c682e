""":class:`delayline.Client`'s recurring schedules: put, pause, resume and delete one;
list them, show one, preview its runs.

A mixin of the client, which runs the plans of :mod:`delayline.plans.scheduling`
(built in :mod:`delayline.client_base`); :mod:`delayline.async_client_schedules` is
its asyncio twin. It also runs the listings (:meth:`ScheduleMethods._listed`), of
schedules and of pending messages: the scheduler scans its state for them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from delayline import timing
from delayline.client_base import ClientBase
from delayline.listing import LISTING_POLL_S, SCHEDULES, ListRequest, listing_waits
from delayline.plans import observing
from delayline.plans.scheduling import definition_from
from delayline.schedules import ops
from delayline.schedules.listed import ListedSchedule
from delayline.schedules.spec import Schedule

if TYPE_CHECKING:
    from delayline.plans import Plan

T = TypeVar("T")
R = TypeVar("R")


class ScheduleMethods(ClientBase):
    """The schedule methods of :class:`delayline.Client`."""

    if TYPE_CHECKING:

        def _run(self, plan: Plan[T]) -> T: ...

    def schedule(
        self,
        name: str,
        topic: str,
        body: bytes | str,
        *,
        cron: str | None = None,
        tz: str | None = None,
        every: timedelta | int | str | None = None,
        anchor: datetime | int | None = None,
        times: Iterable[datetime | int] | None = None,
        start: datetime | int | None = None,
        end: datetime | int | None = None,
        max_runs: int | None = None,
        paused: bool = False,
        catch_up: str = "latest",
        catch_up_window: timedelta | int | None = None,
        catch_up_max_runs: int | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Schedule:
        """Put recurring schedule ``name`` of ``topic``: each run sends ``body`` (with
        ``key`` and ``headers``) to ``topic``, as a message due at the run's time would
        be. Returns the definition written.

        The definition travels as a record on the inbound stream, which the
        scheduler applies in its next batch: a new definition's first run is its
        first one after that batch.

        ``name`` (1-200 characters of ``[A-Za-z0-9._:-]``) is unique within its
        topic: a definition put again under it replaces the old one, and the
        runs already handed to the outbox and not yet due are cancelled. Putting
        the very same definition again changes nothing, so an application may put
        its schedules every time it starts.

        The runs follow exactly one of:

        - ``cron``: 5 fields (minute hour day-of-month month day-of-week) or 6 (a
          second first), on the wall clock of the IANA zone ``tz`` ("UTC" if
          None; only with cron). Daylight saving time: see
          :mod:`delayline.schedules.recurrence`.
        - ``every``: a period of at least 1 s, as a timedelta, ms, or a duration
          such as "15m" or "1h30m"; runs fall at ``anchor + k * every`` (anchor:
          an aware datetime or epoch ms, the Unix epoch if None; only with every).
        - ``times``: up to 1000 instants, aware datetimes or epoch ms.

        Runs outside ``[start, end]`` (aware datetimes or epoch ms, open if None)
        are not sent, nor any after the first ``max_runs``. ``paused`` puts the
        schedule paused (see :meth:`resume`). ``catch_up`` says what becomes of
        runs missed while delayline was down or the schedule paused: "skip" (none
        is sent), "latest" (the latest one, at once) or "all" (each one missed
        within ``catch_up_window`` (timedelta or ms; 1 h if None), at most
        ``catch_up_max_runs`` of them (100 if None), the latest ones).

        Raises ValidationError (and writes nothing) for bad input: none or more
        than one of cron, every and times (field "recurrence"), tz without cron,
        anchor without every, a naive datetime, a cron that never runs, or a
        body, key, headers or topic that a message could not have;
        TransportError if Redis fails.
        """
        definition = definition_from(
            name, topic, body, limits=self.limits, cron=cron, tz=tz, every=every, anchor=anchor,
            times=times, start=start, end=end, max_runs=max_runs, paused=paused,
            catch_up=catch_up, catch_up_window=catch_up_window,
            catch_up_max_runs=catch_up_max_runs, key=key, headers=headers,
        )  # fmt: skip
        return self._run(self._schedule_plan(definition))

    def pause(self, name: str, topic: str) -> None:
        """Pause schedule ``name`` of ``topic``: no run is sent until :meth:`resume`, and
        the runs already handed to the outbox and not yet due are cancelled.

        As :meth:`schedule`, it writes a record that the scheduler applies in its
        next batch, in order with the schedule's other records. Raises
        ValidationError for a name or topic no schedule can have, TransportError if
        Redis fails.
        """
        self._run(self._schedule_change_plan(ops.PAUSE, name, topic))

    def resume(self, name: str, topic: str) -> None:
        """Resume schedule ``name`` of ``topic``; the runs it missed while paused follow
        its ``catch_up`` policy. Raises as :meth:`pause` does."""
        self._run(self._schedule_change_plan(ops.RESUME, name, topic))

    def delete_schedule(self, name: str, topic: str) -> None:
        """Delete schedule ``name`` of ``topic``: no run is sent any more, and the runs
        already handed to the outbox and not yet due are cancelled. Raises as
        :meth:`pause` does."""
        self._run(self._schedule_change_plan(ops.DELETE, name, topic))

    def schedules(
        self, *, topic: str | None = None, limit: int = 100, timeout_s: float = 300.0
    ) -> list[ListedSchedule]:
        """The recurring schedules of ``topic`` (None: of every topic), the first ``limit``
        (1 to 10,000) by topic, then name: each one's definition, state (active,
        paused or finished), next and last run (epoch ms), runs sent and skipped.

        An operator's tool: the running scheduler scans its state for it (a Spark
        batch query over the schedule keys, on the scheduler's cores). A schedule
        put a moment ago is listed once the scheduler's next batch has it, within
        about a second. Raises ValidationError for a limit out of range;
        SchedulerError if no scheduler is running, none takes the request up
        within 30 s, the scan fails, or it takes over ``timeout_s`` seconds.
        """
        request = ListRequest(kind=SCHEDULES, topic=topic, limit=limit)
        return self._listed(request, ListedSchedule.from_json, None, timeout_s)

    def get_schedule(self, name: str, topic: str, *, timeout_s: float = 300.0) -> ListedSchedule:
        """Schedule ``name`` of ``topic``, as :meth:`schedules` lists it (a scan of the
        one key that holds it). Raises ScheduleNotFoundError if the scheduler's state
        has none (never put, deleted, or put so recently that no batch has it yet:
        about a second); ValidationError for a name or topic no schedule can have;
        SchedulerError as :meth:`schedules` does.
        """
        rows = self._listed(
            self._schedule_listing(name, topic), ListedSchedule.from_json, None, timeout_s
        )
        return self._found_schedule(name, topic, rows)

    def next_runs(self, name: str, topic: str, n: int = 10) -> list[datetime]:
        """The next ``n`` (1 to 1,000) run times of schedule ``name`` of ``topic`` after
        now, as aware UTC datetimes, without running anything: its stored definition's
        recurrence within its start, end and the ``max_runs`` it has left (fewer, or
        none, near its end). For a paused schedule, the runs to come once resumed.
        Raises as :meth:`get_schedule` does, and ValidationError for ``n`` out of range.
        """
        self._check_preview(n)
        return self._upcoming(self.get_schedule(name, topic), n)

    def _listed(
        self,
        request: ListRequest,
        parse: Callable[[bytes], R],
        on_progress: Callable[[int, int], None] | None,
        timeout_s: float,
    ) -> list[R]:
        """Ask the running scheduler for ``request``'s listing, wait for it (telling
        ``on_progress`` how far its scan is), and read its rows with ``parse``."""
        listing_id = uuid.uuid4().hex
        request = self._scoped(request)
        self._run(observing.request_listing(listing_id, request, now_ms=timing.now_ms()))
        began = time.monotonic()
        while not (status := self._run(observing.listing_status(listing_id))).finished():
            listing_waits(status, began, timeout_s, on_progress)
            time.sleep(LISTING_POLL_S)
        return self._run(observing.listing_rows(listing_id, parse))
