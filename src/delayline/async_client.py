"""The SDK for asyncio: :class:`AsyncClient` runs the same plans as :class:`Client`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from delayline import local, timing
from delayline.async_client_schedules import AsyncScheduleMethods
from delayline.client_base import (
    DEFAULT_BATCH,
    DEFAULT_BLOCK_MS,
    DEFAULT_CLAIM_IDLE_MS,
    DEFAULT_STATUS_RETENTION_MS,
)
from delayline.client_groups import AsyncGroupMethods
from delayline.client_limits import AsyncLimitMethods
from delayline.delivery import DeliveryBase
from delayline.errors import MessageStateError
from delayline.forecast import DEFAULT_HOT_OVER, Forecast
from delayline.groups import DEFAULT_GROUP
from delayline.history import DEFAULT_MINUTES, History
from delayline.listing import (
    MAX_LIMIT,
    ListRequest,
    PendingMessage,
    by_due_time,
    later_ones,
)
from delayline.model import Message
from delayline.plans import Plan, consuming, observing
from delayline.plans.observing import Metrics, StreamEntry
from delayline.redis.connection import DEFAULT_PATIENCE_MS, AsyncRedisConnection
from delayline.retry import RetryPolicy
from delayline.status import MessageStatus
from delayline.validation import Limits

T = TypeVar("T")


class AsyncClient(AsyncScheduleMethods, AsyncLimitMethods, AsyncGroupMethods):
    """:class:`delayline.Client` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str | None = None,
        *,
        limits: Limits | None = None,
        status_retention_ms: int = DEFAULT_STATUS_RETENTION_MS,
        patience_ms: int | None = DEFAULT_PATIENCE_MS,
        group: str = DEFAULT_GROUP,
    ) -> None:
        super().__init__(limits=limits, status_retention_ms=status_retention_ms, group=group)
        self._connection = AsyncRedisConnection.from_url(
            local.redis_url(url), patience_ms=patience_ms
        )
        self._on_cluster = self._connection.cluster

    async def _run(self, plan: Plan[T]) -> T:
        while True:
            replies = await self._connection.execute(
                plan.commands,
                action=plan.action,
                transaction=plan.transaction,
                errors_ok=plan.errors_ok,
            )
            result = plan.parse(replies)
            if not isinstance(result, Plan):
                return result
            plan = result

    async def send(
        self,
        topic: str,
        body: bytes | str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """See :meth:`delayline.Client.send`."""
        plan = self._send_plan(
            topic, body, delay=delay, deliver_at=deliver_at, level=level, key=key, headers=headers
        )
        return (await self._run(plan))[0]

    async def send_many(self, messages: Iterable[Mapping[str, Any] | Message]) -> list[str]:
        """See :meth:`delayline.Client.send_many`."""
        plan = self._send_many_plan(messages)
        return await self._run(plan) if plan.commands else []

    async def cancel(self, message_id: str) -> bool:
        """See :meth:`delayline.Client.cancel`."""
        return await self._run(self._cancel_plan(message_id))

    async def reschedule(
        self,
        message_id: str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
    ) -> str:
        """See :meth:`delayline.Client.reschedule`."""
        return await self._run(self._reschedule_plan(message_id, delay, deliver_at, level))

    async def status(self, message_id: str) -> MessageStatus:
        """See :meth:`delayline.Client.status`."""
        return await self._run(self._status_plan(message_id))

    async def metrics(self) -> Metrics:
        """See :meth:`delayline.Client.metrics`."""
        return await self._run(self._metrics_plan())

    async def history(self, minutes: int = DEFAULT_MINUTES) -> History:
        """See :meth:`delayline.Client.history`."""
        return await self._run(self._history_plan(minutes))

    async def pending(
        self,
        *,
        by: str = "minute",
        topic: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        hot_over: int = DEFAULT_HOT_OVER,
    ) -> Forecast:
        """See :meth:`delayline.Client.pending`."""
        return await self._run(self._pending_plan(by, topic, start, end, hot_over))

    async def list_pending(
        self,
        *,
        topic: str | None = None,
        key: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 100,
        on_progress: Callable[[int, int], None] | None = None,
        timeout_s: float = 300.0,
    ) -> list[PendingMessage]:
        """See :meth:`delayline.Client.list_pending`."""
        request = self._listing(topic, key, start, end, limit)
        rows = await self._listed(request, PendingMessage.from_json, on_progress, timeout_s)
        return by_due_time(rows + await self._run(self._outbox_plan(request)), limit)

    async def cancel_key(self, topic: str, key: str) -> int:
        """See :meth:`delayline.Client.cancel_key`."""
        request = ListRequest(topic=topic, key=key, limit=MAX_LIMIT)
        soonest = await self._run(self._outbox_plan(request))
        cancelled = await self._run(self._cancel_many_plan(topic, soonest)) if soonest else 0
        listed = await self.list_pending(topic=topic, key=key, limit=MAX_LIMIT)
        rest = later_ones(listed, soonest)
        return cancelled + (await self._run(self._cancel_many_plan(topic, rest)) if rest else 0)

    async def reschedule_key(
        self,
        topic: str,
        key: str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
    ) -> dict[str, str]:
        """See :meth:`delayline.Client.reschedule_key`."""
        moved: dict[str, str] = {}

        async def move(rows: list[PendingMessage]) -> list[PendingMessage]:
            copies = set(moved.values())  # made by the first step: listed too
            for row in rows:
                if row.id in copies:
                    continue
                with contextlib.suppress(MessageStateError):
                    moved[row.id] = await self.reschedule(
                        row.id, delay=delay, deliver_at=deliver_at, level=level
                    )
            return rows

        request = ListRequest(topic=topic, key=key, limit=MAX_LIMIT)
        soonest = await move(await self._run(self._outbox_plan(request)))
        listed = await self.list_pending(topic=topic, key=key, limit=MAX_LIMIT)
        await move(later_ones(listed, soonest))
        return moved

    async def rejects(self, count: int = 20) -> list[StreamEntry]:
        """See :meth:`delayline.Client.rejects`."""
        return await self._run(self._rejects_plan(count))

    async def dead_letters(self, count: int = 20) -> list[StreamEntry]:
        """See :meth:`delayline.Client.dead_letters`."""
        return await self._run(observing.dead_letters(count, self.group))

    async def consume(
        self,
        topic: str,
        group: str,
        *,
        consumer: str | None = None,
        block_ms: int = DEFAULT_BLOCK_MS,
        batch: int = DEFAULT_BATCH,
        claim_idle_ms: int = DEFAULT_CLAIM_IDLE_MS,
        retry_policy: RetryPolicy | None = None,
    ) -> AsyncIterator[AsyncDelivery]:
        """See :meth:`delayline.Client.consume`."""
        plans = self._consumer(topic, group, consumer, batch, block_ms, claim_idle_ms)
        policy = retry_policy or RetryPolicy()
        await self._run(plans.ensure_group())
        while True:
            entries = await self._run(plans.claim()) if plans.claim_due() else []
            for entry in entries or await self._run(plans.read()):
                reason = consuming.foreign_reason(entry, self.limits)
                if reason is None:
                    yield AsyncDelivery(entry, policy, self.limits, self)
                else:
                    await self._run(consuming.dead_letter(entry, reason, now_ms=timing.now_ms()))

    async def follow(
        self, topic: str, *, block_ms: int = DEFAULT_BLOCK_MS, batch: int = DEFAULT_BATCH
    ) -> AsyncIterator[DeliveryBase]:
        """See :meth:`delayline.Client.follow`."""
        after_id = "$"
        policy = RetryPolicy()
        while True:
            plan = consuming.follow(topic, after_id=after_id, count=batch, block_ms=block_ms)
            entries = await self._run(plan)
            after_id = entries[-1].entry_id if entries else after_id
            for entry in consuming.watchable(entries, self.limits):
                yield DeliveryBase(entry, policy, self.limits)

    async def close(self) -> None:
        """Release the connection pool."""
        await self._connection.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


@dataclass(frozen=True)
class AsyncDelivery(DeliveryBase):
    """See :class:`delayline.client.Delivery`; the methods are coroutines."""

    _client: AsyncClient = field(repr=False, compare=False)

    async def ack(self) -> None:
        """See :meth:`delayline.client.Delivery.ack`."""
        await self._client._run(self._ack_plan())

    async def retry_later(
        self, *, level: int | None = None, delay: timedelta | int | None = None
    ) -> bool:
        """See :meth:`delayline.client.Delivery.retry_later`."""
        return await self._client._run(
            self._client._with_published(
                lambda published: self._retry_plan(level, delay, published)
            )
        )

    async def dead_letter(self, reason: str) -> None:
        """See :meth:`delayline.client.Delivery.dead_letter`."""
        await self._client._run(self._dead_letter_plan(reason))
