"""``/v1/pending``: what is pending, counted per time bucket, or listed."""

from __future__ import annotations

from fastapi import APIRouter, Query

from delayline.api.dependencies import DueWindow, Sdk
from delayline.api.schemas import ForecastOut, PendingMessagesOut
from delayline.forecast import DEFAULT_HOT_OVER
from delayline.listing import MAX_LIMIT

router = APIRouter()


@router.get("/v1/pending", response_model=ForecastOut)
async def pending(
    due: DueWindow,
    client: Sdk,
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


@router.get("/v1/pending/messages", response_model=PendingMessagesOut)
async def pending_messages(
    due: DueWindow,
    client: Sdk,
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
