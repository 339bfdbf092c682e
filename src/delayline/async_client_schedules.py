""":class:`delayline.AsyncClient`'s recurring schedules: the methods of
:mod:`delayline.client_schedules`, awaited; and the listings it runs."""

from __future__ import annotations

import asyncio
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


class AsyncScheduleMethods(ClientBase):
    """The schedule methods of :class:`delayline.AsyncClient`."""

    if TYPE_CHECKING:

        async def _run(self, plan: Plan[T]) -> T: ...

    async def schedule(
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
        """See :meth:`delayline.Client.schedule`."""
        definition = definition_from(
            name, topic, body, limits=self.limits, cron=cron, tz=tz, every=every, anchor=anchor,
            times=times, start=start, end=end, max_runs=max_runs, paused=paused,
            catch_up=catch_up, catch_up_window=catch_up_window,
            catch_up_max_runs=catch_up_max_runs, key=key, headers=headers,
        )  # fmt: skip
        return await self._run(self._schedule_plan(definition))

    async def pause(self, name: str, topic: str) -> None:
        """See :meth:`delayline.Client.pause`."""
        await self._run(self._schedule_change_plan(ops.PAUSE, name, topic))

    async def resume(self, name: str, topic: str) -> None:
        """See :meth:`delayline.Client.resume`."""
        await self._run(self._schedule_change_plan(ops.RESUME, name, topic))

    async def delete_schedule(self, name: str, topic: str) -> None:
        """See :meth:`delayline.Client.delete_schedule`."""
        await self._run(self._schedule_change_plan(ops.DELETE, name, topic))

    async def schedules(
        self, *, topic: str | None = None, limit: int = 100, timeout_s: float = 300.0
    ) -> list[ListedSchedule]:
        """See :meth:`delayline.Client.schedules`."""
        request = ListRequest(kind=SCHEDULES, topic=topic, limit=limit)
        return await self._listed(request, ListedSchedule.from_json, None, timeout_s)

    async def get_schedule(
        self, name: str, topic: str, *, timeout_s: float = 300.0
    ) -> ListedSchedule:
        """See :meth:`delayline.Client.get_schedule`."""
        rows = await self._listed(
            self._schedule_listing(name, topic), ListedSchedule.from_json, None, timeout_s
        )
        return self._found_schedule(name, topic, rows)

    async def next_runs(self, name: str, topic: str, n: int = 10) -> list[datetime]:
        """See :meth:`delayline.Client.next_runs`."""
        self._check_preview(n)
        return self._upcoming(await self.get_schedule(name, topic), n)

    async def _listed(
        self,
        request: ListRequest,
        parse: Callable[[bytes], R],
        on_progress: Callable[[int, int], None] | None,
        timeout_s: float,
    ) -> list[R]:
        """See :meth:`delayline.client_schedules.ScheduleMethods._listed`."""
        listing_id = uuid.uuid4().hex
        request = self._scoped(request)
        await self._run(observing.request_listing(listing_id, request, now_ms=timing.now_ms()))
        began = time.monotonic()
        while not (status := await self._run(observing.listing_status(listing_id))).finished():
            listing_waits(status, began, timeout_s, on_progress)
            await asyncio.sleep(LISTING_POLL_S)
        return await self._run(observing.listing_rows(listing_id, parse))
