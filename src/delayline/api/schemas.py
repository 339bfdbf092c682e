"""Request and response bodies of the HTTP API, and their conversion to the SDK's terms."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from pydantic import ValidationError as PydanticValidationError

from delayline import timing
from delayline.errors import ValidationError
from delayline.forecast import Forecast, Granularity
from delayline.history import History
from delayline.listing import PendingMessage
from delayline.model import Message
from delayline.moments import parse_moment_ms
from delayline.plans.observing import StreamEntry
from delayline.status import MessageStatus, State
from delayline.validation import Limits

#: Most messages one batch request may carry.
MAX_BATCH = 10_000
#: The pattern of a topic's name, for the schema (delayline.validation enforces it).
TOPIC_PATTERN = "^([a-z0-9][a-z0-9_-]{0,31}/)?[A-Za-z0-9._:-]{1,249}$"


def body_of(body: str | None, body_b64: str | None) -> bytes | str:
    """The body a request gives as text (``body``) or in base64 (``body_b64``): exactly
    one of them. Raises ValidationError."""
    if (body is None) == (body_b64 is None):
        raise ValidationError("body", "exclusive", "give exactly one of body or body_b64")
    if body is not None:
        return body  # UTF-8 encoded by validation, which refuses a lone surrogate
    try:
        return base64.b64decode(body_b64 or "", validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        raise ValidationError("body_b64", "base64", "body_b64 is not valid base64") from None


class When(TypedDict):
    """The SDK's arguments for when a message is due."""

    delay: int | None
    deliver_at: int | None
    level: int | None


class WhenIn(BaseModel):
    """When a message is due: at most one of ``delay_ms``, ``deliver_at`` (RFC 3339 with
    an offset, or epoch ms as a number or a string) and ``level``; none of the three
    means now."""

    model_config = ConfigDict(extra="forbid")

    delay_ms: StrictInt | None = Field(
        default=None, examples=[1_800_000], json_schema_extra={"minimum": 0}
    )
    deliver_at: StrictInt | StrictStr | None = Field(
        default=None, examples=["2026-12-01T09:00:00Z", 1_796_115_600_000]
    )
    level: StrictInt | None = Field(
        default=None,
        description="RocketMQ delay level 1..18.",
        json_schema_extra={"minimum": 1, "maximum": 18},
    )

    def when(self) -> When:
        """The SDK's ``delay``, ``deliver_at`` and ``level``. Raises ValidationError for
        a time that is neither RFC 3339 nor epoch ms."""
        deliver_at = self.deliver_at
        if isinstance(deliver_at, str):
            deliver_at = parse_moment_ms(deliver_at, "deliver_at")
        return {"delay": self.delay_ms, "deliver_at": deliver_at, "level": self.level}


class RescheduleIn(WhenIn):
    """A new time for a pending message."""


class MessageIn(WhenIn):
    """A message to schedule. Give ``body`` (UTF-8 text) or ``body_b64``, and at most one
    of ``delay_ms``, ``deliver_at`` (RFC 3339 with an offset, or epoch ms) and ``level``;
    none of the three means now."""

    model_config = ConfigDict(extra="forbid")

    # Documented in the schema; enforced (with delayline's own error names) by to_message.
    topic: StrictStr = Field(
        examples=["orders.timeout"],
        json_schema_extra={"pattern": TOPIC_PATTERN},
    )
    body: StrictStr | None = Field(default=None, examples=["order-42"])
    body_b64: StrictStr | None = Field(default=None, description="The body, base64-encoded.")
    key: StrictStr | None = None
    headers: dict[StrictStr, StrictStr] | None = None

    def to_message(self, *, now_ms: int, limits: Limits) -> Message:
        """The validated message. Raises ValidationError naming the field and rule."""
        return Message.create(
            self.topic,
            body_of(self.body, self.body_b64),
            now_ms=now_ms,
            limits=limits,
            key=self.key,
            headers=self.headers,
            **self.when(),
        )


class RescheduledOut(BaseModel):
    """The new message that replaces ``previous_id``, and when it is due."""

    id: str
    previous_id: str
    deliver_at: str
    deliver_at_ms: int


class RescheduledByKeyOut(BaseModel):
    """Each message of the key that was rescheduled."""

    rescheduled: list[RescheduledOut]


class CancelledByKeyOut(BaseModel):
    """How many pending messages of the key were cancelled."""

    cancelled: int


class BatchIn(BaseModel):
    """Up to 10,000 messages. Each is checked on its own: one bad item does not stop the rest."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH)


class ErrorDetail(BaseModel):
    """Which field broke which rule."""

    field: str
    rule: str
    message: str

    @classmethod
    def of(cls, exc: ValidationError | PydanticValidationError) -> ErrorDetail:
        if isinstance(exc, ValidationError):
            return cls(field=exc.field, rule=exc.rule, message=exc.message)
        return cls.of_pydantic(exc.errors())

    @classmethod
    def of_pydantic(cls, errors: Sequence[Any]) -> ErrorDetail:
        """The first of pydantic's errors, named by its location without the "body" prefix."""
        first = errors[0] if errors else {}
        location = [str(part) for part in first.get("loc", ()) if part != "body"]
        return cls(
            field=".".join(location) or "body",
            rule=str(first.get("type", "invalid")),
            message=str(first.get("msg", "invalid request")),
        )


class ErrorOut(BaseModel):
    """Every 4xx and 5xx answer has this body."""

    error: ErrorDetail


class ScheduledOut(BaseModel):
    """A scheduled message: its id and when it is due."""

    id: str
    deliver_at: str = Field(description="RFC 3339, UTC.")
    deliver_at_ms: int

    @classmethod
    def of(cls, message: Message) -> ScheduledOut:
        return cls(
            id=message.id,
            deliver_at=timing.format_time(message.deliver_at_ms),
            deliver_at_ms=message.deliver_at_ms,
        )


class BatchItemOut(BaseModel):
    """One item's outcome: ``id`` and ``deliver_at`` if scheduled, else ``error``."""

    index: int
    id: str | None = None
    deliver_at: str | None = None
    deliver_at_ms: int | None = None
    error: ErrorDetail | None = None


class BatchOut(BaseModel):
    """Per-item results, in request order."""

    accepted: int
    rejected: int
    results: list[BatchItemOut]


class StatusOut(BaseModel):
    """What became of a message: ``delivered_at`` once delivered, ``reason`` once rejected."""

    id: str
    state: State
    deliver_at: str
    deliver_at_ms: int
    delivered_at: str | None = None
    delivered_at_ms: int | None = None
    reason: str | None = None
    rescheduled_to: str | None = None

    @classmethod
    def of(cls, status: MessageStatus) -> StatusOut:
        return cls.model_validate(status.to_json())


class CancelledOut(BaseModel):
    """The cancel is recorded; the message will not be delivered."""

    id: str
    cancelled: bool = True


class HealthOut(BaseModel):
    """``ok`` when Redis answers and the scheduler completed a batch recently."""

    status: str
    redis: bool
    scheduler_alive: bool
    query_id: str | None = None
    last_batch_age_ms: int | None = None
    #: Why Redis cannot serve, while it cannot (loading, unreachable, disk full).
    error: str | None = None


class BucketOut(BaseModel):
    """Messages due in the bucket that starts at ``start`` (RFC 3339, UTC), per topic.

    A cancel by id leaves ``count`` at once but its topic only when its slot fires."""

    start: str
    count: int
    topics: dict[str, int]


class HotOut(BaseModel):
    """A second, starting at ``at``, with more than ``hot_over`` messages due."""

    at: str
    count: int


class HistoryMinuteOut(BaseModel):
    """What the minute starting at ``minute`` (RFC 3339, UTC) delivered, dropped and
    rejected; its deliveries' lateness percentiles (ms, a bucket's upper bound; "+Inf"
    past the last; null without deliveries), mean, and histogram (bucket -> count)."""

    minute: str
    minute_ms: int
    delivered: int
    dropped: int
    rejected: int
    lateness_p50_ms: float | str | None
    lateness_p99_ms: float | str | None
    lateness_mean_ms: float | None
    lateness_buckets: dict[str, int]


class HistoryOut(BaseModel):
    """The minutes from ``from`` to ``to`` (RFC 3339, UTC), oldest first, each one."""

    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    delivered: int
    minutes: list[HistoryMinuteOut]

    @classmethod
    def of(cls, history: History) -> HistoryOut:
        return cls.model_validate(history.to_json())


class ForecastOut(BaseModel):
    """Pending messages by bucket (only the non-empty ones, in time order) and hot instants."""

    by: Granularity
    topic: str | None
    total: int
    buckets: list[BucketOut]
    hot_over: int
    hot: list[HotOut]

    @classmethod
    def of(cls, forecast: Forecast) -> ForecastOut:
        return cls.model_validate(forecast.to_json())


class EntryOut(BaseModel):
    """A stream entry: a reject or a dead letter, its fields as text (each cut to 200
    characters), ``at`` when Redis added it."""

    stream: str
    entry_id: str
    at: str
    fields: dict[str, str]

    @classmethod
    def of(cls, entry: StreamEntry) -> EntryOut:
        return cls(
            stream=entry.stream,
            entry_id=entry.entry_id,
            at=timing.format_time(entry.at_ms),
            fields=entry.fields,
        )


class PendingMessageOut(BaseModel):
    """A pending message: ``where`` is ``state`` (the scheduler's) or ``outbox``."""

    id: str
    topic: str
    key: str
    deliver_at: str
    deliver_at_ms: int
    attempt: int
    body_bytes: int
    where: str


class PendingMessagesOut(BaseModel):
    """The first pending messages asked for, by due time."""

    messages: list[PendingMessageOut]

    @classmethod
    def of(cls, rows: Sequence[PendingMessage]) -> PendingMessagesOut:
        return cls.model_validate({"messages": [row.to_json() for row in rows]})
