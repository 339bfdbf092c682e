""":class:`delayline.AsyncClient`'s recurring schedules: the methods of
:mod:`delayline.client_schedules`, awaited."""

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
