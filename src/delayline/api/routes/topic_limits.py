"""``/v1/limits``: a topic's delivery limit (a rate and a spread; see
:mod:`delayline.limits`): put, delete and list them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from delayline.api.dependencies import Sdk
from delayline.api.error_responses import error_response
from delayline.api.schemas import ErrorOut
from delayline.limits import MAX_RATE_PER_S, MAX_SPREAD_MS, TopicLimit, spread_ms_of

router = APIRouter()


class LimitIn(BaseModel):
    """A topic's delivery limit: a rate, a spread, or both. Either is never early: a
    message held for it goes later than its due time, never sooner."""

    model_config = ConfigDict(extra="forbid")

    # The rules are documented here and enforced, with delayline's own error names, by
    # TopicLimit: the SDK's rules and messages are the API's.
    rate_per_s: StrictInt | None = Field(
        default=None,
        description="At most this many deliveries a second, earliest due first.",
        json_schema_extra={"minimum": 1, "maximum": MAX_RATE_PER_S},
    )
    spread: StrictInt | StrictStr | None = Field(
        default=None,
        description="Each message goes a stable pseudo-random 0 to this long past its due "
        f"time (ms, or text: 30s), so a herd is spread; at most {MAX_SPREAD_MS:,} ms.",
        examples=["30s"],
    )


class LimitOut(BaseModel):
    """A topic's delivery limit as delayline keeps it."""

    topic: str
    rate_per_s: int | None
    spread_ms: int

    @classmethod
    def of(cls, limit: TopicLimit) -> LimitOut:
        return cls(**limit.to_dict())


NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "The topic has no delivery limit."}
}


@router.get("/v1/limits", response_model=list[LimitOut])
async def limits(client: Sdk) -> list[LimitOut]:
    """Every topic's delivery limit, by topic."""
    return [LimitOut.of(limit) for limit in await client.topic_limits()]


@router.put("/v1/limits/{topic}", response_model=LimitOut)
async def put_limit(topic: str, limit: LimitIn, client: Sdk) -> LimitOut:
    """Set (or replace) the topic's delivery limit. It applies from the pump's next call
    to every message of the topic not yet delivered."""
    spread_ms = spread_ms_of(limit.spread)
    return LimitOut.of(
        await client.set_topic_limit(topic, rate_per_s=limit.rate_per_s, spread=spread_ms)
    )


@router.delete("/v1/limits/{topic}", status_code=204, responses=NOT_FOUND)
async def delete_limit(topic: str, client: Sdk) -> Response:
    """Take the topic's limit away: its messages go at their due time again (those held
    already go at the time they were held until)."""
    if not await client.delete_topic_limit(topic):
        return error_response(404, "topic", "unknown", f"topic {topic!r} has no delivery limit")
    return Response(status_code=204)
