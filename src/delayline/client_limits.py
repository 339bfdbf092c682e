""":class:`delayline.Client`'s delivery limits: set, delete and list a topic's rate and
spread (see :mod:`delayline.limits`). A mixin of the client, which runs the plans
of :mod:`delayline.plans.limiting`; :class:`AsyncLimitMethods` is its asyncio twin."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from delayline.client_base import ClientBase
from delayline.limits import TopicLimit, spread_ms_of
from delayline.plans import limiting

if TYPE_CHECKING:
    from delayline.plans import Plan

T = TypeVar("T")


class LimitMethods(ClientBase):
    """The delivery-limit methods of :class:`delayline.Client`."""

    if TYPE_CHECKING:

        def _run(self, plan: Plan[T]) -> T: ...

    def set_topic_limit(
        self,
        topic: str,
        *,
        rate_per_s: int | None = None,
        spread: timedelta | int | str | None = None,
    ) -> TopicLimit:
        """Limit ``topic``'s deliveries to ``rate_per_s`` a second, earliest due first,
        and/or spread each message over ``spread`` (a timedelta, ms, or "30s") past
        its due time; replaces the topic's limit. Never early. Applies from the
        pump's next call, to messages not yet delivered. Raises ValidationError for a
        bad topic, rate or spread, or neither given."""
        return self._run(self._set_limit_plan(TopicLimit(topic, rate_per_s, spread_ms_of(spread))))

    def delete_topic_limit(self, topic: str) -> bool:
        """Take ``topic``'s limit away (messages held for it still go at their slots);
        True if it had one. Raises ValidationError for a bad topic."""
        return self._run(self._delete_limit_plan(topic))

    def topic_limits(self) -> list[TopicLimit]:
        """Every topic's delivery limit, by topic."""
        return self._run(limiting.limits(self.group))


class AsyncLimitMethods(ClientBase):
    """The delivery-limit methods of :class:`delayline.AsyncClient`."""

    if TYPE_CHECKING:

        async def _run(self, plan: Plan[T]) -> T: ...

    async def set_topic_limit(
        self,
        topic: str,
        *,
        rate_per_s: int | None = None,
        spread: timedelta | int | str | None = None,
    ) -> TopicLimit:
        """See :meth:`LimitMethods.set_topic_limit`."""
        plan = self._set_limit_plan(TopicLimit(topic, rate_per_s, spread_ms_of(spread)))
        return await self._run(plan)

    async def delete_topic_limit(self, topic: str) -> bool:
        """See :meth:`LimitMethods.delete_topic_limit`."""
        return await self._run(self._delete_limit_plan(topic))

    async def topic_limits(self) -> list[TopicLimit]:
        """See :meth:`LimitMethods.topic_limits`."""
        return await self._run(limiting.limits(self.group))
