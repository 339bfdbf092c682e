""":class:`delayline.Client`'s group administration: create a group with its quotas and
token, list the groups, change a group's quotas (see :mod:`delayline.groups`). A mixin
of the client, which runs the plans of :mod:`delayline.plans.grouping`;
:class:`AsyncGroupMethods` is its asyncio twin."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from delayline import timing
from delayline.client_base import ClientBase
from delayline.groups import Group, Quotas, new_token
from delayline.plans import grouping

if TYPE_CHECKING:
    from delayline.plans import Plan

T = TypeVar("T")

#: The longest a new group waits for the running scheduler to pump its lane (s).
LANE_WAIT_S = 5.0
LANE_POLL_S = 0.05


class CreatedGroup(NamedTuple):
    """A new group, and its token: the only time delayline shows it (it keeps its
    digest only)."""

    group: Group
    token: str


def _create_plan(name: str, quotas: Quotas | None) -> tuple[Plan[Group], str]:
    token = new_token()
    group = Group(name, quotas or Quotas(), timing.now_ms())
    return grouping.create_group(group, token), token


class GroupMethods(ClientBase):
    """The group methods of :class:`delayline.Client`."""

    if TYPE_CHECKING:

        def _run(self, plan: Plan[T]) -> T: ...

    def create_group(self, name: str, quotas: Quotas | None = None) -> CreatedGroup:
        """Create group ``name`` with ``quotas`` (None: no bound) and a fresh token; while
        a scheduler runs, return once it pumps the group's lane (within about a second;
        LANE_WAIT_S at most), so that a message sent next is on time. Raises
        ValidationError for a bad name or quota, or the registry full, and
        GroupExistsError for a name taken."""
        plan, token = _create_plan(name, quotas)
        created = CreatedGroup(self._run(plan), token)
        deadline = time.monotonic() + LANE_WAIT_S
        while time.monotonic() < deadline and self._run(
            grouping.lane_waits(name, now_ms=timing.now_ms())
        ):
            time.sleep(LANE_POLL_S)
        return created

    def groups(self) -> list[Group]:
        """Every group besides the default one, by name."""
        return self._run(grouping.groups())

    def get_group(self, name: str) -> Group:
        """Group ``name`` (the default group has no quotas). Raises GroupNotFoundError
        for an unknown one."""
        return self._run(grouping.group(name))

    def group_of_token(self, token: str) -> str | None:
        """The name of the group whose token ``token`` is, or None."""
        return self._run(grouping.group_of_token(token))

    def set_group_quotas(self, name: str, quotas: Quotas) -> Group:
        """Replace group ``name``'s quotas; clients apply them within 10 s. Raises
        GroupNotFoundError for an unknown group."""
        return self._run(grouping.set_quotas(name, quotas))


class AsyncGroupMethods(ClientBase):
    """The group methods of :class:`delayline.AsyncClient`, awaited."""

    if TYPE_CHECKING:

        async def _run(self, plan: Plan[T]) -> T: ...

    async def create_group(self, name: str, quotas: Quotas | None = None) -> CreatedGroup:
        """:meth:`GroupMethods.create_group`, awaited."""
        plan, token = _create_plan(name, quotas)
        created = CreatedGroup(await self._run(plan), token)
        deadline = time.monotonic() + LANE_WAIT_S
        while time.monotonic() < deadline and await self._run(
            grouping.lane_waits(name, now_ms=timing.now_ms())
        ):
            await asyncio.sleep(LANE_POLL_S)
        return created

    async def groups(self) -> list[Group]:
        """:meth:`GroupMethods.groups`, awaited."""
        return await self._run(grouping.groups())

    async def get_group(self, name: str) -> Group:
        """:meth:`GroupMethods.get_group`, awaited."""
        return await self._run(grouping.group(name))

    async def group_of_token(self, token: str) -> str | None:
        """:meth:`GroupMethods.group_of_token`, awaited."""
        return await self._run(grouping.group_of_token(token))

    async def set_group_quotas(self, name: str, quotas: Quotas) -> Group:
        """:meth:`GroupMethods.set_group_quotas`, awaited."""
        return await self._run(grouping.set_quotas(name, quotas))
