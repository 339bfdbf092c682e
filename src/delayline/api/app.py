"""The HTTP API: ``create_app`` builds a FastAPI app over an AsyncClient.

Routes (OpenAPI at ``/openapi.json``; Swagger UI at ``/docs`` when asked for):

- ``POST /v1/messages``: schedule one message (201).
- ``POST /v1/messages:batch``: schedule up to 10,000 (per-item results).
- ``GET /v1/messages/{id}``: status.
- ``DELETE /v1/messages/{id}``: cancel (404 unknown, 409 already delivered or rejected).
- ``PATCH /v1/messages/{id}``: reschedule (404 unknown, 409 no longer pending).
- ``DELETE /v1/messages?topic=&key=``, ``PATCH /v1/messages?topic=&key=``: by producer key.
- ``GET /v1/pending``: the forecast, pending messages per time bucket and topic.
- ``GET /v1/pending/messages``: the pending messages themselves (a scan of the state).
- ``GET /v1/stats``: counters, lateness, the scheduler's last batch (``delayline stats``).
- ``GET /v1/rejects``, ``GET /v1/dead-letters``: the newest refused records and dead letters.
- ``GET /ui``: the dashboard (``/ui?token=...`` once, when a token is required).
- ``GET /healthz``: Redis and scheduler liveness (503 if either is down).
- ``GET /metrics``: Prometheus text.

Every error body is ``{"error": {"field", "rule", "message"}}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from pydantic import ValidationError as PydanticValidationError

from delayline import ids, timing
from delayline.__about__ import __version__
from delayline.api.middleware import (
    LOOPBACK_HOSTS,
    TOKEN_COOKIE,
    BearerTokenAuth,
    HostAllowList,
    JsonBodies,
    RequestSizeLimit,
)
from delayline.api.schemas import (
    BatchIn,
    BatchItemOut,
    BatchOut,
    CancelledByKeyOut,
    CancelledOut,
    EntryOut,
    ErrorDetail,
    ErrorOut,
    ForecastOut,
    HealthOut,
    MessageIn,
    PendingMessagesOut,
    RescheduledByKeyOut,
    RescheduledOut,
    RescheduleIn,
    ScheduledOut,
    StatusOut,
)
from delayline.async_client import AsyncClient
from delayline.errors import (
    DelaylineError,
    MessageStateError,
    SchedulerError,
    TransportError,
    ValidationError,
)
from delayline.forecast import DEFAULT_HOT_OVER
from delayline.listing import MAX_LIMIT
from delayline.model import Message
from delayline.moments import parse_moment_ms
from delayline.plans.observing import SCHEDULER_ALIVE_MS
from delayline.validation import Limits

#: Largest request body accepted (bytes): a full batch of small messages fits.
DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 404, 409, 413, 422, 503)
}


log = logging.getLogger(__name__)

#: The dashboard's page: HTML, CSS and JavaScript in one file, no build step.
DASHBOARD_HTML = (resources.files("delayline.api") / "dashboard.html").read_text(encoding="utf-8")

#: How long a request waits for a Redis that is loading or unreachable before 503 (ms).
API_PATIENCE_MS = 1_000
#: How long /healthz waits for Redis's answer before 503 (s): a load balancer's check
#: times out in a few seconds, and a Redis that hangs must read as down, not slow.
HEALTH_TIMEOUT_S = 1.5


def moment(text: str | None, field: str) -> datetime | None:
    """A query parameter's time (RFC 3339, epoch ms, or a duration from now) as an aware
    datetime; None if absent. Raises ValidationError naming ``field``."""
    if text is None:
        return None
    return timing.from_epoch_ms(parse_moment_ms(text, field, now_ms=timing.now_ms()))


#: What ``from`` and ``to`` take.
TIME_FORMS = "RFC 3339, epoch ms, or a duration from now (2h)"


@dataclass(frozen=True)
class Window:
    """A window of due times, ``[start, end)``; None is open on that side."""

    start: datetime | None
    end: datetime | None


def window(
    start: str | None = Query(None, alias="from", description=f"{TIME_FORMS}; open if absent"),
    end: str | None = Query(None, alias="to", description=f"{TIME_FORMS}; excluded"),
) -> Window:
    """The ``from`` and ``to`` query parameters of a route that takes a window (a
    dependency). Raises ValidationError naming the parameter."""
    return Window(moment(start, "from"), moment(end, "to"))


#: A route parameter that takes ``from`` and ``to`` as a :class:`Window`.
DueWindow = Annotated[Window, Depends(window)]


def rescheduled(new_id: str, previous_id: str) -> RescheduledOut:
    """The answer for a message ``previous_id`` that ``new_id`` replaces."""
    deliver_at_ms = ids.deliver_at_ms_of(new_id)
    return RescheduledOut(
        id=new_id,
        previous_id=previous_id,
        deliver_at=timing.format_time(deliver_at_ms),
        deliver_at_ms=deliver_at_ms,
    )


def error_response(status: int, field: str, rule: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "rule": rule, "message": message}}, status)


def create_app(
    redis_url: str,
    *,
    api_token: str | None = None,
    limits: Limits | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    allowed_hosts: Collection[str] = LOOPBACK_HOSTS,
    docs: bool = False,
) -> FastAPI:
    """The API app for the delayline behind ``redis_url``; ``api_token`` turns on auth,
    ``allowed_hosts`` are the names it answers to (``*``: any), and ``docs`` serves
    Swagger UI at ``/docs`` (its page loads from a CDN)."""
    # Short patience: a caller should hear 503 soon, not wait for an outage to end.
    client = AsyncClient(redis_url, limits=limits, patience_ms=API_PATIENCE_MS)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await client.close()

    app = FastAPI(
        title="delayline",
        version=__version__,
        lifespan=lifespan,
        responses=ERRORS,
        description="Delayed messages: durable, cancellable, never early.",
        docs_url="/docs" if docs else None,
        redoc_url=None,
    )
    # The last added runs first: the Host, then the token, the size, the media type.
    app.add_middleware(JsonBodies)
    app.add_middleware(RequestSizeLimit, max_bytes=max_request_bytes)
    if api_token:
        app.add_middleware(BearerTokenAuth, token=api_token)
    app.add_middleware(HostAllowList, hosts=allowed_hosts)

    @app.exception_handler(ValidationError)
    async def invalid(_: Request, exc: ValidationError) -> JSONResponse:
        return error_response(422, exc.field, exc.rule, exc.message)

    @app.exception_handler(RequestValidationError)
    async def malformed(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = ErrorDetail.of_pydantic(exc.errors())
        return error_response(422, detail.field, detail.rule, detail.message)

    @app.exception_handler(TransportError)
    async def unavailable(_: Request, exc: TransportError) -> JSONResponse:
        return error_response(503, "redis", "unavailable", str(exc))

    @app.exception_handler(SchedulerError)
    async def no_scheduler(_: Request, exc: SchedulerError) -> JSONResponse:
        return error_response(503, "scheduler", "unavailable", str(exc))

    @app.exception_handler(DelaylineError)
    async def failed(_: Request, exc: DelaylineError) -> JSONResponse:
        return error_response(500, "server", "error", str(exc))

    @app.post("/v1/messages", status_code=201, response_model=ScheduledOut)
    async def send(message: MessageIn) -> ScheduledOut:
        """Schedule one message."""
        built = message.to_message(now_ms=timing.now_ms(), limits=client.limits)
        await client.send_many([built])
        return ScheduledOut.of(built)

    @app.post("/v1/messages:batch", response_model=BatchOut, response_model_exclude_none=True)
    async def send_batch(batch: BatchIn) -> BatchOut:
        """Schedule many messages; each item is validated on its own and reported in order."""
        now_ms = timing.now_ms()
        results: list[BatchItemOut] = []
        accepted: list[Message] = []
        for index, item in enumerate(batch.messages):
            try:
                built = MessageIn.model_validate(item).to_message(
                    now_ms=now_ms, limits=client.limits
                )
            except (ValidationError, PydanticValidationError) as exc:
                results.append(BatchItemOut(index=index, error=ErrorDetail.of(exc)))
                continue
            accepted.append(built)
            results.append(BatchItemOut(index=index, **ScheduledOut.of(built).model_dump()))
        if accepted:
            await client.send_many(accepted)
        return BatchOut(
            accepted=len(accepted), rejected=len(results) - len(accepted), results=results
        )

    @app.get("/v1/messages/{message_id}", response_model=StatusOut)
    async def status(message_id: str) -> StatusOut:
        """What became of a message: pending, delivered, cancelled, rejected or unknown."""
        return StatusOut.of(await client.status(message_id))

    @app.delete("/v1/messages/{message_id}", response_model=CancelledOut)
    async def cancel(message_id: str) -> CancelledOut | JSONResponse:
        """Cancel a pending message."""
        current = await client.status(message_id)
        if current.state == "unknown":
            return error_response(404, "id", "unknown", f"no message {message_id} is known")
        if current.state in ("delivered", "rejected") or not await client.cancel(message_id):
            return error_response(
                409, "id", current.state, f"message {message_id} is already {current.state}"
            )
        return CancelledOut(id=message_id)

    @app.get("/v1/pending", response_model=ForecastOut)
    async def pending(
        due: DueWindow,
        by: str = "minute",
        topic: str | None = None,
        hot_over: int = Query(DEFAULT_HOT_OVER, ge=0),
    ) -> ForecastOut:
        """Pending messages per ``by`` bucket (minute, hour or day, UTC) and topic, due in
        ``[from, to)`` rounded out to whole minutes, and the seconds with more than
        ``hot_over`` due. Answers from counters, whatever the number pending."""
        forecast = await client.pending(
            by=by, topic=topic, start=due.start, end=due.end, hot_over=hot_over
        )
        return ForecastOut.of(forecast)

    @app.patch("/v1/messages/{message_id}", response_model=RescheduledOut)
    async def reschedule(message_id: str, when: RescheduleIn) -> RescheduledOut | JSONResponse:
        """Move a pending message to a new time: a copy under a new id, delivered once then;
        the old one never is."""
        try:
            new_id = await client.reschedule(message_id, **when.when())
        except MessageStateError as exc:
            status = 404 if exc.state == "unknown" else 409
            return error_response(status, "id", exc.state, str(exc))
        return rescheduled(new_id, message_id)

    @app.delete("/v1/messages", response_model=CancelledByKeyOut)
    async def cancel_key(topic: str, key: str) -> CancelledByKeyOut:
        """Cancel every pending message of ``topic`` with producer ``key`` (up to 10,000 a
        call): a scan of the scheduler's state finds them, seconds at 1M pending."""
        return CancelledByKeyOut(cancelled=await client.cancel_key(topic, key))

    @app.patch("/v1/messages", response_model=RescheduledByKeyOut)
    async def reschedule_key(topic: str, key: str, when: RescheduleIn) -> RescheduledByKeyOut:
        """Reschedule every pending message of ``topic`` with producer ``key`` (up to 10,000
        a call), found as ``DELETE /v1/messages`` finds them."""
        moved = await client.reschedule_key(topic, key, **when.when())
        return RescheduledByKeyOut(
            rescheduled=[rescheduled(new_id, old_id) for old_id, new_id in moved.items()]
        )

    @app.get("/v1/pending/messages", response_model=PendingMessagesOut)
    async def pending_messages(
        due: DueWindow,
        topic: str | None = None,
        key: str | None = None,
        limit: int = Query(100, ge=1, le=MAX_LIMIT),
    ) -> PendingMessagesOut:
        """The first ``limit`` pending messages by due time: an operator's tool, for which
        the running scheduler scans its whole state (seconds at 1M pending)."""
        rows = await client.list_pending(
            topic=topic, key=key, start=due.start, end=due.end, limit=limit
        )
        return PendingMessagesOut.of(rows)

    @app.get("/v1/stats")
    async def stats() -> dict[str, Any]:
        """Counters, pending, outbox, lateness percentiles and histogram, the last batch's
        age and duration, and the horizon: ``delayline stats --json``."""
        return (await client.metrics()).to_json()

    @app.get("/v1/rejects", response_model=list[EntryOut])
    async def rejects(count: int = Query(20, ge=1, le=1_000)) -> list[EntryOut]:
        """The newest refused records, newest first, each with its ``reason``."""
        return [EntryOut.of(entry) for entry in await client.rejects(count)]

    @app.get("/v1/dead-letters", response_model=list[EntryOut])
    async def dead_letters(count: int = Query(20, ge=1, le=1_000)) -> list[EntryOut]:
        """The newest dead letters across every ``<topic>.DLQ``, newest first (a key-space
        scan: an operator's view)."""
        return [EntryOut.of(entry) for entry in await client.dead_letters(count)]

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    async def dashboard(token: str | None = None) -> Response:
        """The dashboard: one page, plain HTML and JavaScript, reading the routes above."""
        if token is not None:
            # The middleware checked it: keep it in a cookie, and out of the address bar.
            moved = RedirectResponse("/ui", status_code=303)
            moved.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return moved
        return HTMLResponse(DASHBOARD_HTML)

    @app.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
    async def health() -> JSONResponse:
        """Redis reachable and the scheduler alive (a batch in the last 30 s)."""
        try:
            metrics = await asyncio.wait_for(client.metrics(), HEALTH_TIMEOUT_S)
        except (TransportError, TimeoutError) as exc:
            # Whoever asks /healthz needs no token: the detail is the operator's, in the log.
            log.warning("health check: %s", exc or f"Redis did not answer in {HEALTH_TIMEOUT_S} s")
            down = HealthOut(
                status="unavailable",
                redis=False,
                scheduler_alive=False,
                error="Redis is unavailable",
            )
            return JSONResponse(down.model_dump(), 503)
        age_ms = metrics.last_batch_age_ms
        alive = age_ms is not None and age_ms < SCHEDULER_ALIVE_MS
        report = HealthOut(
            status="ok" if alive else "degraded",
            redis=True,
            scheduler_alive=alive,
            query_id=metrics.heartbeat.get("query_id"),
            last_batch_age_ms=age_ms,
        )
        return JSONResponse(report.model_dump(), 200 if alive else 503)

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        """Counters, pending gauge, and lateness and batch-duration histograms (Prometheus)."""
        text = (await client.metrics()).prometheus()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return app
