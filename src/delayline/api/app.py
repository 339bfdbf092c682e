"""The HTTP API: ``create_app`` builds a FastAPI app over an AsyncClient.

Routes (OpenAPI at ``/openapi.json``; Swagger UI at ``/docs`` when asked for):

- ``POST /v1/messages``: schedule one message (201).
- ``POST /v1/messages:batch``: schedule up to 10,000 (per-item results).
- ``GET /v1/messages/{id}``: status.
- ``DELETE /v1/messages/{id}``: cancel (404 unknown, 409 already delivered or rejected).
- ``PATCH /v1/messages/{id}``: reschedule (404 unknown, 409 no longer pending).
- ``DELETE /v1/messages?topic=&key=``, ``PATCH /v1/messages?topic=&key=``: by producer key.
- ``PUT /v1/schedules/{topic}/{name}``: put a recurring schedule (the definition stored).
- ``DELETE /v1/schedules/{topic}/{name}``, ``POST .../pause``, ``POST .../resume``: 202,
  applied by the scheduler's next batch.
- ``GET /v1/schedules?topic=&limit=``, ``GET /v1/schedules/{topic}/{name}``: recurring
  schedules with their state (a scan of the state; 404 for an unknown one).
- ``GET /v1/schedules/{topic}/{name}/next?n=``: a stored schedule's next runs.
- ``GET /v1/limits``, ``PUT /v1/limits/{topic}``, ``DELETE /v1/limits/{topic}``: topics'
  delivery limits (a rate, a spread).
- ``GET /v1/pending``: the forecast, pending messages per time bucket and topic.
- ``GET /v1/pending/messages``: the pending messages themselves (a scan of the state).
- ``GET /v1/stats``: counters, lateness, the scheduler's last batch (``delayline stats``).
- ``GET /v1/rejects``, ``GET /v1/dead-letters``: the newest refused records and dead letters.
- ``GET|POST /v1/admin/groups``, ``GET /v1/admin/groups/{name}``, ``PUT .../quotas``: the
  Manager's groups, with their health and history (the admin token only).

A group's token makes every other route act for that group (docs/groups.md).
- ``GET /ui``: the dashboard (``/ui?token=...`` once, when a token is required).
- ``GET /healthz``: Redis and scheduler liveness (503 if either is down).
- ``GET /metrics``: Prometheus text.

Every error body is ``{"error": {"field", "rule", "message"}}``
(:mod:`delayline.api.error_responses`). The routes live in
:mod:`delayline.api.routes`, one router per area.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

from fastapi import FastAPI

from delayline.__about__ import __version__
from delayline.api.dependencies import GroupTokens
from delayline.api.error_responses import ERRORS, add_error_handlers
from delayline.api.middleware import (
    LOOPBACK_HOSTS,
    BearerTokenAuth,
    HostAllowList,
    JsonBodies,
    RequestSizeLimit,
)
from delayline.api.routes import (
    dashboard,
    groups,
    messages,
    monitoring,
    pending,
    schedules,
    topic_limits,
)
from delayline.async_client import AsyncClient
from delayline.validation import Limits

#: Largest request body accepted (bytes): a full batch of small messages fits.
DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024

#: How long a request waits for a Redis that is loading or unreachable before 503 (ms).
API_PATIENCE_MS = 1_000


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
    app.state.client = client  # what the routes take (delayline.api.dependencies.sdk)
    app.state.group_clients = {}  # the same, acting for each group that asked
    # The last added runs first: the Host, then the token, the size, the media type.
    app.add_middleware(JsonBodies)
    app.add_middleware(RequestSizeLimit, max_bytes=max_request_bytes)
    app.add_middleware(BearerTokenAuth, token=api_token or None, find_group=GroupTokens(client))
    app.add_middleware(HostAllowList, hosts=allowed_hosts)
    add_error_handlers(app)
    for area in (messages, schedules, topic_limits, pending, monitoring, groups, dashboard):
        app.include_router(area.router)
    return app
