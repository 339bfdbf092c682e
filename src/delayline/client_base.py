"""What :class:`delayline.Client` and :class:`delayline.AsyncClient` share: the
limits, the scheduler's published config, and the plan behind each method. The
clients differ only in how they run a plan (``_run``: blocking, or awaited).
"""

from __future__ import annotations

import copy
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Self, TypeVar

from delayline import timing
from delayline.errors import ScheduleNotFoundError, ValidationError, quoted
from delayline.forecast import Forecast, check_granularity
from delayline.groups import DEFAULT_GROUP, Group, group_of, qualify, validate_group
from delayline.history import History, check_minutes
from delayline.limits import TopicLimit
from delayline.listing import SCHEDULES, ListRequest, PendingMessage
from delayline.model import Message, message_from
from delayline.plans import (
    Plan,
    consuming,
    delivery_history,
    grouping,
    limiting,
    observing,
    producing,
    quotas,
    scheduling,
)
from delayline.redis import keys
from delayline.schedules.listed import ListedSchedule
from delayline.schedules.spec import Schedule, validate_name
from delayline.status import MessageStatus
from delayline.validation import Limits, resolve_deliver_at_ms, validate_topic

T = TypeVar("T")

#: How long the SDK keeps a cancel request for ``status`` (ms): the scheduler's
#: default journal retention, so both records age out together.
DEFAULT_STATUS_RETENTION_MS = keys.JOURNAL_RETENTION_MS

#: Consumer defaults: wait for new entries up to 5 s; reclaim another consumer's
#: unacknowledged entries after 60 s idle.
DEFAULT_BLOCK_MS = 5_000
DEFAULT_BATCH = 100
DEFAULT_CLAIM_IDLE_MS = 60_000

#: The most runs :meth:`delayline.Client.next_runs` previews.
MAX_PREVIEW = 1_000


def default_consumer_name() -> str:
    """``<hostname>-<pid>``: unique per process, stable for its life."""
    return f"{socket.gethostname()}-{os.getpid()}"


def message_batch(
    items: Iterable[Mapping[str, Any] | Message], *, now_ms: int, limits: Limits
) -> list[Message]:
    """Validate every item before anything is sent; the error names the item's index."""
    messages = []
    for index, item in enumerate(items):
        try:
            messages.append(message_from(item, now_ms=now_ms, limits=limits))
        except ValidationError as exc:
            raise ValidationError(
                f"messages[{index}].{exc.field}", exc.rule, f"message {index}: {exc.message}"
            ) from exc
    return messages


class ClientBase:
    """What Client and AsyncClient share: limits, and the plans behind every method."""

    def __init__(
        self, *, limits: Limits | None, status_retention_ms: int, group: str = DEFAULT_GROUP
    ) -> None:
        #: The group this client acts for (delayline/groups.py): its topics, status
        #: records, counters and limits.
        self.group = validate_group(group)
        self._group_info: Group | None = None
        self._group_read_at_ms = 0.0
        self.limits = limits or Limits()
        self.status_retention_ms = status_retention_ms
        #: The scheduler's config once it has published it, and when it was read
        #: (monotonic ms): read again after producing.SHARDS_REFRESH_MS, since a
        #: drain can change it.
        self._published: producing.Published | None = None
        self._published_at_ms = 0
        #: Whether the connection's Redis is a cluster (set by the subclass).
        self._on_cluster = False

    def for_group(self, group: str) -> Self:
        """This client acting for ``group``, on the same connection (closing either
        closes it). Raises ValidationError for a name no group can have."""
        other = copy.copy(self)
        other.group = validate_group(group)
        other._group_info, other._group_read_at_ms = None, 0.0
        return other

    def _message(self, topic: str, body: bytes | str, **arguments: Any) -> Message:
        return Message.create(topic, body, now_ms=timing.now_ms(), limits=self.limits, **arguments)

    def _send_plan(self, topic: str, body: bytes | str, **arguments: Any) -> Plan[list[str]]:
        return self._sends_plan([self._message(topic, body, **arguments)])

    def _send_many_plan(self, messages: Iterable[Mapping[str, Any] | Message]) -> Plan[list[str]]:
        batch = message_batch(messages, now_ms=timing.now_ms(), limits=self.limits)
        return self._sends_plan(batch)

    def _sends_plan(self, messages: list[Message]) -> Plan[list[str]]:
        if self.group == DEFAULT_GROUP:
            return self._with_published(lambda published: producing.send(messages, published))
        messages = [message._replace(topic=self._topic(message.topic)) for message in messages]
        return self._with_group(
            lambda group: self._with_published(
                lambda published: quotas.send_within(group, messages, published)
            )
        )

    def _with_group(self, build: Callable[[Group], Plan[T]]) -> Plan[T]:
        """``build``'s plan for this client's group as the registry holds it (its quotas),
        read first unless known for less than producing.SHARDS_REFRESH_MS. Raises
        GroupNotFoundError if the group was never created."""
        now = time.monotonic() * 1000
        if self._group_info is not None and now - self._group_read_at_ms <= (
            producing.SHARDS_REFRESH_MS
        ):
            return build(self._group_info)
        read = grouping.group(self.group)

        def then(replies: list[Any]) -> Plan[T]:
            found = read.parse(replies)
            assert isinstance(found, Group)
            self._group_info, self._group_read_at_ms = found, now
            return build(found)

        return Plan(read.commands, then, read.action)

    def _topic(self, topic: str) -> str:
        """``topic`` as this client's group names it (delayline/groups.py); a topic
        qualified already must be the group's. Raises ValidationError."""
        if self.group == DEFAULT_GROUP or not isinstance(topic, str):
            return topic
        if group_of(topic) == self.group:
            return topic
        return validate_topic(qualify(self.group, topic))

    def _with_published(self, build: Callable[[producing.Published], Plan[T]]) -> Plan[T]:
        """``build``'s plan for the scheduler's config (its shards and horizon), read
        first unless known for less than producing.SHARDS_REFRESH_MS."""
        if time.monotonic() * 1000 - self._published_at_ms > producing.SHARDS_REFRESH_MS:
            self._published = None
        group = self.group
        return producing.with_published(
            lambda published: build(replace(published, group=group)),
            self._published,
            self._learn,
            on_cluster=self._on_cluster,
        )

    def _learn(self, published: producing.Published) -> None:
        self._published = published
        self._published_at_ms = int(time.monotonic() * 1000)

    def _cancel_plan(self, message_id: str) -> Plan[bool]:
        return self._with_published(
            lambda published: producing.cancel(
                message_id,
                now_ms=timing.now_ms(),
                retention_ms=self.status_retention_ms,
                published=published,
                limits=self.limits,
            )
        )

    def _reschedule_plan(
        self,
        message_id: str,
        delay: timedelta | int | None,
        deliver_at: datetime | int | None,
        level: int | None,
    ) -> Plan[str]:
        now = timing.now_ms()
        deliver_at_ms = resolve_deliver_at_ms(
            now_ms=now, limits=self.limits, delay=delay, deliver_at=deliver_at, level=level
        )
        return self._with_published(
            lambda published: producing.reschedule(
                message_id,
                deliver_at_ms,
                now_ms=now,
                retention_ms=self.status_retention_ms,
                published=published,
                limits=self.limits,
            )
        )

    def _schedule_plan(self, definition: Schedule) -> Plan[Schedule]:
        definition = replace(definition, topic=self._topic(definition.topic))
        return self._with_published(
            lambda published: scheduling.put(
                definition, now_ms=timing.now_ms(), published=published
            )
        )

    def _schedule_change_plan(self, action: str, name: str, topic: str) -> Plan[None]:
        return self._with_published(
            lambda published: scheduling.change(
                action, self._topic(topic), name, now_ms=timing.now_ms(), published=published
            )
        )

    def _listing(
        self,
        topic: str | None,
        key: str | None,
        start: datetime | None,
        end: datetime | None,
        limit: int,
    ) -> ListRequest:
        return ListRequest(
            topic=topic,
            key=key,
            from_ms=None if start is None else timing.to_epoch_ms(start, "start"),
            to_ms=None if end is None else timing.to_epoch_ms(end, "end"),
            limit=limit,
        )

    def _scoped(self, request: ListRequest) -> ListRequest:
        """``request`` as this client's group may ask it: of the group's topics only."""
        if self.group == DEFAULT_GROUP:
            return request
        topic = None if request.topic is None else self._topic(request.topic)
        return replace(request, topic=topic, group=self.group)

    @staticmethod
    def _schedule_listing(name: str, topic: str) -> ListRequest:
        """The listing of schedule ``(topic, name)``. Raises ValidationError for a name
        or topic no schedule can have."""
        return ListRequest(
            kind=SCHEDULES,
            topic=validate_topic(topic),
            name=validate_name(name),
            limit=1,
        )

    @staticmethod
    def _found_schedule(name: str, topic: str, rows: list[ListedSchedule]) -> ListedSchedule:
        """The one row of :meth:`_schedule_listing`; ScheduleNotFoundError if none."""
        if not rows:
            raise ScheduleNotFoundError(name, topic)
        return rows[0]

    @staticmethod
    def _check_preview(n: int) -> None:
        """Raise ValidationError unless ``n`` runs, 1 to MAX_PREVIEW, can be previewed."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PREVIEW:
            raise ValidationError("n", "range", f"n must be 1 to {MAX_PREVIEW:,}; got {quoted(n)}")

    @staticmethod
    def _upcoming(listed: ListedSchedule, n: int) -> list[datetime]:
        """:meth:`ListedSchedule.upcoming` from now, as aware UTC datetimes."""
        return [timing.from_epoch_ms(run_ms) for run_ms in listed.upcoming(n, timing.now_ms())]

    def _cancel_many_plan(self, topic: str, rows: list[PendingMessage]) -> Plan[int]:
        def build(published: producing.Published) -> Plan[int]:
            published.require_scripts("cancel messages")
            return producing.cancel_many(
                [row.id for row in rows],
                self._topic(topic),
                now_ms=timing.now_ms(),
                retention_ms=self.status_retention_ms,
                shards=published.shards,
            )

        return self._with_published(build)

    def _status_plan(self, message_id: str) -> Plan[MessageStatus]:
        return self._with_published(
            lambda published: producing.status(
                message_id, now_ms=timing.now_ms(), published=published
            )
        )

    def _rejects_plan(self, count: int) -> Plan[list[observing.StreamEntry]]:
        return self._with_published(
            lambda published: observing.rejects(
                count, shards=published.read_shards, group=published.group
            )
        )

    def _outbox_plan(self, request: ListRequest) -> Plan[list[PendingMessage]]:
        return self._with_published(
            lambda published: observing.outbox_listing(
                self._scoped(request),
                shards=published.read_shards,
                on_cluster=published.on_cluster,
                group=published.group,
            )
        )

    def _metrics_plan(self) -> Plan[observing.Metrics]:
        return self._with_published(
            lambda published: observing.metrics(
                now_ms=timing.now_ms(), shards=published.read_shards, group=published.group
            )
        )

    def _set_limit_plan(self, limit: TopicLimit) -> Plan[TopicLimit]:
        if group_of(limit.topic) != self.group:  # TopicLimit checks what this makes
            limit = replace(limit, topic=qualify(self.group, limit.topic))
        return self._with_published(
            lambda published: limiting.set_limit(
                limit, shards=published.shards, read_shards=published.read_shards
            )
        )

    def _delete_limit_plan(self, topic: str) -> Plan[bool]:
        return self._with_published(
            lambda published: limiting.delete_limit(
                topic if group_of(topic) == self.group else qualify(self.group, topic),
                read_shards=published.read_shards,
            )
        )

    def _history_plan(self, minutes: int) -> Plan[History]:
        check_minutes(minutes)
        return self._with_published(
            lambda published: delivery_history.history(
                minutes=minutes,
                now_ms=timing.now_ms(),
                shards=published.read_shards,
                group=published.group,
            )
        )

    def _pending_plan(
        self,
        by: str,
        topic: str | None,
        start: datetime | None,
        end: datetime | None,
        hot_over: int,
    ) -> Plan[Forecast]:
        granularity = check_granularity(by)
        from_ms = None if start is None else timing.to_epoch_ms(start, "start")
        to_ms = None if end is None else timing.to_epoch_ms(end, "end")
        return self._with_published(
            lambda published: observing.forecast(
                by=granularity,
                topic=None if topic is None else self._topic(topic),
                from_ms=from_ms,
                to_ms=to_ms,
                hot_over=hot_over,
                now_ms=timing.now_ms(),
                shards=published.read_shards,
                group=published.group,
            )
        )

    def _consumer(
        self,
        topic: str,
        group: str,
        consumer: str | None,
        batch: int,
        block_ms: int,
        claim_idle_ms: int,
    ) -> consuming.Consumer:
        return consuming.Consumer(
            self._topic(topic),
            group,
            consumer or default_consumer_name(),
            batch=batch,
            block_ms=block_ms,
            claim_idle_ms=claim_idle_ms,
        )
