"""The SDK: produce (send, send_many, cancel), ask (status), and consume; recurring
schedules come from :mod:`delayline.client_schedules`.

Every method is a plan from :mod:`delayline.plans` run in one pipelined
round trip (the plans are built in :mod:`delayline.client_base`);
:mod:`delayline.async_client` runs the same plans with asyncio.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from delayline import local, timing
from delayline.client_base import (
    DEFAULT_BATCH,
    DEFAULT_BLOCK_MS,
    DEFAULT_CLAIM_IDLE_MS,
    DEFAULT_STATUS_RETENTION_MS,
    message_batch,
)
from delayline.client_groups import GroupMethods
from delayline.client_limits import LimitMethods
from delayline.client_schedules import ScheduleMethods
from delayline.delivery import DeliveryBase
from delayline.errors import ConfigurationError, MessageStateError
from delayline.forecast import DEFAULT_HOT_OVER, Forecast
from delayline.groups import DEFAULT_GROUP
from delayline.history import DEFAULT_MINUTES, History
from delayline.kafka.records import INBOUND_TOPIC
from delayline.listing import (
    MAX_LIMIT,
    ListRequest,
    PendingMessage,
    by_due_time,
    later_ones,
)
from delayline.model import Message
from delayline.plans import Plan, consuming, observing
from delayline.redis.connection import DEFAULT_PATIENCE_MS, RedisConnection
from delayline.retry import RetryPolicy
from delayline.status import MessageStatus
from delayline.validation import Limits

if TYPE_CHECKING:
    from delayline.kafka.producer import KafkaInboundProducer

T = TypeVar("T")


def kafka_producer(brokers: str, topic: str) -> KafkaInboundProducer:
    """A producer of inbound records to Kafka. Raises ConfigurationError if
    confluent-kafka (the kafka extra) is not installed."""
    try:
        from delayline.kafka.producer import KafkaInboundProducer  # only when asked for
    except ImportError as exc:
        raise ConfigurationError(
            "sending through Kafka needs confluent-kafka: pip install 'delayline[kafka]'"
        ) from exc
    return KafkaInboundProducer(brokers, topic)


class Client(ScheduleMethods, LimitMethods, GroupMethods):
    """A connection to the Redis that a delayline scheduler reads.

    ``Client()`` connects to ``$DELAYLINE_REDIS_URL``, else to the embedded server of a
    ``delayline run`` in ``$DELAYLINE_DATA_DIR`` or ``./delayline-data`` (its URL and
    password are in ``<data dir>/redis/url``), else to ``redis://127.0.0.1:6390/0``.
    ``limits`` should match the scheduler's, so what the client accepts the
    scheduler accepts too. While Redis is loading its data or briefly
    unreachable, a call retries with backoff for up to ``patience_ms`` (5 s;
    ``None`` waits until it serves) before raising ConnectError. Every error
    raised derives from DelaylineError.

    With ``kafka`` (brokers, ``host:port,...``), sends are produced to the Kafka
    inbound topic ``kafka_topic`` of a ``delayline run --kafka`` scheduler
    instead; everything else (cancel, status, the forecast) still goes through
    ``url``. Raises ConfigurationError if confluent-kafka is not installed. ``group``:
    the group it acts for, within its quotas (docs/groups.md): its topics are the
    group's (``send("invoices", ...)`` goes to ``<group>/invoices``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        limits: Limits | None = None,
        status_retention_ms: int = DEFAULT_STATUS_RETENTION_MS,
        patience_ms: int | None = DEFAULT_PATIENCE_MS,
        kafka: str | None = None,
        kafka_topic: str = INBOUND_TOPIC,
        group: str = DEFAULT_GROUP,
    ) -> None:
        super().__init__(limits=limits, status_retention_ms=status_retention_ms, group=group)
        self._connection = RedisConnection.from_url(local.redis_url(url), patience_ms=patience_ms)
        self._on_cluster = self._connection.cluster
        self._kafka = None if kafka is None else kafka_producer(kafka, kafka_topic)

    def _run(self, plan: Plan[T]) -> T:
        while True:
            replies = self._connection.execute(
                plan.commands,
                action=plan.action,
                transaction=plan.transaction,
                errors_ok=plan.errors_ok,
            )
            result = plan.parse(replies)
            if not isinstance(result, Plan):
                return result
            plan = result

    def send(
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
        """Schedule ``body`` for ``topic``; returns the message id.

        Give at most one of ``delay`` (timedelta or ms), ``deliver_at`` (aware
        datetime or epoch ms) or ``level`` (RocketMQ level 1..18); none means
        now. Raises ValidationError (and writes nothing) for bad input,
        TransportError if Redis (or Kafka) fails.
        """
        message = self._message(
            topic, body, delay=delay, deliver_at=deliver_at, level=level, key=key, headers=headers
        )
        return self._send([message])[0]

    def send_many(self, messages: Iterable[Mapping[str, Any] | Message]) -> list[str]:
        """Schedule many messages in one pipelined transaction; returns their ids in order.

        Each item is a mapping of :meth:`send`'s arguments or a :class:`Message`.
        All are validated first: one bad item raises ValidationError naming its
        index, and nothing is sent.
        """
        return self._send(message_batch(messages, now_ms=timing.now_ms(), limits=self.limits))

    def _send(self, messages: list[Message]) -> list[str]:
        if not messages:
            return []
        if self._kafka is not None:
            self._kafka.send([message.to_record() for message in messages])
            return [message.id for message in messages]
        return self._run(self._sends_plan(messages))

    def cancel(self, message_id: str) -> bool:
        """Cancel a pending message; True once the cancel is recorded (or already was).

        False if the message was already delivered or rejected, or is unknown.
        The cancel wins if it reaches the scheduler before the message's slot
        fires. Raises InvalidMessageIdError for a malformed id.
        """
        return self._run(self._cancel_plan(message_id))

    def reschedule(
        self,
        message_id: str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
    ) -> str:
        """Move a pending message to a new time (one of ``delay``, ``deliver_at`` or
        ``level``, as for ``send``; none means now); returns the new message's id.

        The old message is never delivered, and a copy of it (topic, body, key,
        headers, attempt) is delivered once, at the new time, under the new id;
        ``status`` of the old id says ``rescheduled`` and names it. A message
        waiting in the outbox moves at once; one in the scheduler's state within a
        batch. Raises MessageStateError if the message was delivered, cancelled,
        rescheduled or rejected already, or is unknown; ValidationError for a bad time.
        """
        return self._run(self._reschedule_plan(message_id, delay, deliver_at, level))

    def status(self, message_id: str) -> MessageStatus:
        """``pending``, ``delivered``, ``cancelled``, ``rejected`` or ``unknown``.

        One round trip, whatever the number of pending messages.

        Delivered and cancelled are remembered for the scheduler's journal
        retention (1 day by default). Raises InvalidMessageIdError for a
        malformed id.
        """
        return self._run(self._status_plan(message_id))

    def metrics(self) -> observing.Metrics:
        """The scheduler's counters, lateness and batch-duration histograms, and heartbeat."""
        return self._run(self._metrics_plan())

    def history(self, minutes: int = DEFAULT_MINUTES) -> History:
        """What the last ``minutes`` minutes (the current one included, UTC) delivered,
        dropped and rejected, and their lateness: the server keeps the last day and an
        hour. One round trip. Raises ValidationError outside 1..1,500 minutes."""
        return self._run(self._history_plan(minutes))

    def pending(
        self,
        *,
        by: str = "minute",
        topic: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        hot_over: int = DEFAULT_HOT_OVER,
    ) -> Forecast:
        """How many messages are pending, per ``by`` bucket (minute, hour or day, UTC)
        and topic, due in ``[start, end)`` (open-ended if None), and the seconds with
        more than ``hot_over`` due.

        Read from counters kept per due minute: a few round trips, whatever the
        number pending; the window is rounded out to whole minutes. Raises
        ValidationError for an unknown ``by``, a naive datetime, or an empty window.
        """
        return self._run(self._pending_plan(by, topic, start, end, hot_over))

    def list_pending(
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
        """The first ``limit`` pending messages by due time, of ``topic`` and ``key``
        (None: any), due in ``[start, end)``: id, topic, key, due time, attempt, body size.

        An operator's tool: the running scheduler scans its whole state for it (a
        Spark batch query, seconds at 1M pending, on the scheduler's cores), and
        the outbox is read too. ``on_progress(done, total)`` is called with the
        scan's tasks as it goes. Raises SchedulerError if no scheduler takes the
        request up within 30 s, the scan fails, or it takes over ``timeout_s``.
        """
        request = self._listing(topic, key, start, end, limit)
        rows = self._listed(request, PendingMessage.from_json, on_progress, timeout_s)
        return by_due_time(rows + self._run(self._outbox_plan(request)), limit)

    def cancel_key(self, topic: str, key: str) -> int:
        """Cancel every pending message of ``topic`` with producer key ``key``; returns how
        many were cancelled.

        Those in the outbox, due within the scheduler's horizon, are cancelled at
        once; the rest are listed first (a scan of the scheduler's state, see
        :meth:`list_pending`: seconds at 1M pending, and what was sent a moment
        ago), up to 10,000 per call. The cancels take effect as :meth:`cancel`'s
        do. Raises SchedulerError as the listing does.
        """
        request = ListRequest(topic=topic, key=key, limit=MAX_LIMIT)
        soonest = self._run(self._outbox_plan(request))
        cancelled = self._run(self._cancel_many_plan(topic, soonest)) if soonest else 0
        rest = later_ones(self.list_pending(topic=topic, key=key, limit=MAX_LIMIT), soonest)
        return cancelled + (self._run(self._cancel_many_plan(topic, rest)) if rest else 0)

    def reschedule_key(
        self,
        topic: str,
        key: str,
        *,
        delay: timedelta | int | None = None,
        deliver_at: datetime | int | None = None,
        level: int | None = None,
    ) -> dict[str, str]:
        """Reschedule every pending message of ``topic`` with producer key ``key`` (as
        :meth:`reschedule` does, up to 10,000 per call); returns each old id's new id.

        Those in the outbox, due soonest, go first; the rest are listed as
        :meth:`cancel_key` lists them. One delivered meanwhile is left out.
        """
        moved: dict[str, str] = {}

        def move(rows: list[PendingMessage]) -> list[PendingMessage]:
            copies = set(moved.values())  # made by the first step: listed too
            for row in rows:
                if row.id in copies:
                    continue
                with contextlib.suppress(MessageStateError):
                    moved[row.id] = self.reschedule(
                        row.id, delay=delay, deliver_at=deliver_at, level=level
                    )
            return rows

        request = ListRequest(topic=topic, key=key, limit=MAX_LIMIT)
        soonest = move(self._run(self._outbox_plan(request)))
        move(later_ones(self.list_pending(topic=topic, key=key, limit=MAX_LIMIT), soonest))
        return moved

    def rejects(self, count: int = 20) -> list[observing.StreamEntry]:
        """The newest ``count`` records the scheduler refused, newest first, each with
        its ``reason`` (from ``delayline:rejects``)."""
        return self._run(self._rejects_plan(count))

    def dead_letters(self, count: int = 20) -> list[observing.StreamEntry]:
        """The newest ``count`` dead letters across every ``<topic>.DLQ``, newest first.

        It walks the key space to find those streams (SCAN): an operator's call.
        """
        return self._run(observing.dead_letters(count, self.group))

    def consume(
        self,
        topic: str,
        group: str,
        *,
        consumer: str | None = None,
        block_ms: int = DEFAULT_BLOCK_MS,
        batch: int = DEFAULT_BATCH,
        claim_idle_ms: int = DEFAULT_CLAIM_IDLE_MS,
        retry_policy: RetryPolicy | None = None,
    ) -> Iterator[Delivery]:
        """Yield deliveries of ``topic`` to consumer group ``group``, forever.

        Creates the group if missing (it starts at the beginning of the
        stream). Entries another consumer left unacknowledged for
        ``claim_idle_ms`` are reclaimed first (XAUTOCLAIM). Call ``ack``,
        ``retry_later`` or ``dead_letter`` on each delivery. An entry that another
        writer put in the topic, not a delivery, goes to ``<topic>.DLQ`` with its
        reason instead of being yielded.
        """
        plans = self._consumer(topic, group, consumer, batch, block_ms, claim_idle_ms)
        policy = retry_policy or RetryPolicy()
        self._run(plans.ensure_group())
        while True:
            entries = self._run(plans.claim()) if plans.claim_due() else []
            for entry in entries or self._run(plans.read()):
                reason = consuming.foreign_reason(entry, self.limits)
                if reason is None:
                    yield Delivery(entry, policy, self.limits, self)
                else:
                    self._run(consuming.dead_letter(entry, reason, now_ms=timing.now_ms()))

    def follow(
        self, topic: str, *, block_ms: int = DEFAULT_BLOCK_MS, batch: int = DEFAULT_BATCH
    ) -> Iterator[DeliveryBase]:
        """Yield entries added to ``topic`` from now on, without a consumer group (read-only)."""
        after_id = "$"
        policy = RetryPolicy()
        while True:
            plan = consuming.follow(topic, after_id=after_id, count=batch, block_ms=block_ms)
            entries = self._run(plan)
            after_id = entries[-1].entry_id if entries else after_id
            for entry in consuming.watchable(entries, self.limits):
                yield DeliveryBase(entry, policy, self.limits)

    def close(self) -> None:
        """Release the connection pool (and wait a while for Kafka sends in flight)."""
        self._connection.close()
        if self._kafka is not None:
            self._kafka.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class Delivery(DeliveryBase):
    """A delivered message; settle it with exactly one of the methods below."""

    _client: Client = field(repr=False, compare=False)

    def ack(self) -> None:
        """Done: the group will not see this entry again."""
        self._client._run(self._ack_plan())

    def retry_later(
        self, *, level: int | None = None, delay: timedelta | int | None = None
    ) -> bool:
        """Deliver again later, with ``attempt + 1``; ack this entry, atomically.

        The wait is ``level`` or ``delay`` if given, else the retry policy's.
        Once the policy's retries are used up the message goes to
        ``<topic>.DLQ`` instead and this returns False.
        """
        return self._client._run(
            self._client._with_published(
                lambda published: self._retry_plan(level, delay, published)
            )
        )

    def dead_letter(self, reason: str) -> None:
        """Give up: move the entry to ``<topic>.DLQ`` with ``reason``, and ack it."""
        self._client._run(self._dead_letter_plan(reason))
