""":class:`delayline.Client`'s recurring schedules: put, pause, resume and delete one.

A mixin of the client, which runs the plans of :mod:`delayline.plans.scheduling`
(built in :mod:`delayline.client_base`); :mod:`delayline.async_client_schedules` is
its asyncio twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from delayline.client_base import ClientBase
from delayline.plans.scheduling import definition_from
from delayline.schedules import ops
from delayline.schedules.spec import Schedule

if TYPE_CHECKING:
    from delayline.plans import Plan

T = TypeVar("T")


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
