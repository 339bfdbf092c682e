"""What an operator or a monitor reads: stats, the delivery history, refused records,
dead letters, the health check and Prometheus metrics."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, PlainTextResponse

from delayline.api.dependencies import Sdk
from delayline.api.schemas import EntryOut, HealthOut, HistoryOut
from delayline.errors import TransportError
from delayline.groups import DEFAULT_GROUP
from delayline.history import DEFAULT_MINUTES, MAX_MINUTES
from delayline.plans.observing import SCHEDULER_ALIVE_MS, Metrics

#: How long /healthz waits for Redis's answer before 503 (s): a load balancer's check
#: times out in a few seconds, and a Redis that hangs must read as down, not slow.
HEALTH_TIMEOUT_S = 1.5

log = logging.getLogger(__name__)

router = APIRouter()


@router.get("/v1/stats")
async def stats(client: Sdk) -> dict[str, Any]:
    """Counters, pending, outbox, lateness percentiles and histogram, the last batch's
    age and duration, and the horizon: ``delayline stats --json``."""
    return (await client.metrics()).to_json()


@router.get("/v1/history", response_model=HistoryOut)
async def history(
    client: Sdk, minutes: int = Query(DEFAULT_MINUTES, ge=1, le=MAX_MINUTES)
) -> HistoryOut:
    """What each of the last ``minutes`` minutes (UTC, the current one last) delivered,
    dropped and rejected, and its lateness: kept by the server for a day and an hour,
    whoever reads it."""
    return HistoryOut.of(await client.history(minutes))


@router.get("/v1/rejects", response_model=list[EntryOut])
async def rejects(client: Sdk, count: int = Query(20, ge=1, le=1_000)) -> list[EntryOut]:
    """The newest refused records, newest first, each with its ``reason``."""
    return [EntryOut.of(entry) for entry in await client.rejects(count)]


@router.get("/v1/dead-letters", response_model=list[EntryOut])
async def dead_letters(client: Sdk, count: int = Query(20, ge=1, le=1_000)) -> list[EntryOut]:
    """The newest dead letters across every ``<topic>.DLQ``, newest first (a key-space
    scan: an operator's view)."""
    return [EntryOut.of(entry) for entry in await client.dead_letters(count)]


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def health(client: Sdk) -> JSONResponse:
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


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(client: Sdk) -> PlainTextResponse:
    """Counters, pending gauge, and lateness and batch-duration histograms (Prometheus);
    for the default group without a label, and for each other group with its ``group``
    label (a group's token reads its own, without one)."""
    current = await client.metrics()
    groups: dict[str, Metrics] = {}
    if client.group == DEFAULT_GROUP:
        names = [group.name for group in await client.groups()]
        found = await asyncio.gather(*(client.for_group(name).metrics() for name in names))
        groups = dict(zip(names, found, strict=True))
    text = current.prometheus(groups)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
