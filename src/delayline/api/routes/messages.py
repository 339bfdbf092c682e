"""``/v1/messages``: schedule, ask about, cancel and reschedule messages."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError

from delayline import ids, timing
from delayline.api.dependencies import Sdk
from delayline.api.error_responses import error_response
from delayline.api.schemas import (
    BatchIn,
    BatchItemOut,
    BatchOut,
    CancelledByKeyOut,
    CancelledOut,
    ErrorDetail,
    MessageIn,
    RescheduledByKeyOut,
    RescheduledOut,
    RescheduleIn,
    ScheduledOut,
    StatusOut,
)
from delayline.errors import MessageStateError, ValidationError
from delayline.model import Message

router = APIRouter()


def rescheduled(new_id: str, previous_id: str) -> RescheduledOut:
    """The answer for a message ``previous_id`` that ``new_id`` replaces."""
    deliver_at_ms = ids.deliver_at_ms_of(new_id)
    return RescheduledOut(
        id=new_id,
        previous_id=previous_id,
        deliver_at=timing.format_time(deliver_at_ms),
        deliver_at_ms=deliver_at_ms,
    )


@router.post("/v1/messages", status_code=201, response_model=ScheduledOut)
async def send(message: MessageIn, client: Sdk) -> ScheduledOut:
    """Schedule one message."""
    built = message.to_message(now_ms=timing.now_ms(), limits=client.limits)
    await client.send_many([built])
    return ScheduledOut.of(built)


@router.post("/v1/messages:batch", response_model=BatchOut, response_model_exclude_none=True)
async def send_batch(batch: BatchIn, client: Sdk) -> BatchOut:
    """Schedule many messages; each item is validated on its own and reported in order."""
    now_ms = timing.now_ms()
    results: list[BatchItemOut] = []
    accepted: list[Message] = []
    for index, item in enumerate(batch.messages):
        try:
            built = MessageIn.model_validate(item).to_message(now_ms=now_ms, limits=client.limits)
        except (ValidationError, PydanticValidationError) as exc:
            results.append(BatchItemOut(index=index, error=ErrorDetail.of(exc)))
            continue
        accepted.append(built)
        results.append(BatchItemOut(index=index, **ScheduledOut.of(built).model_dump()))
    if accepted:
        await client.send_many(accepted)
    return BatchOut(accepted=len(accepted), rejected=len(results) - len(accepted), results=results)


@router.get("/v1/messages/{message_id}", response_model=StatusOut)
async def status(message_id: str, client: Sdk) -> StatusOut:
    """What became of a message: pending, delivered, cancelled, rejected or unknown."""
    return StatusOut.of(await client.status(message_id))


@router.delete("/v1/messages/{message_id}", response_model=CancelledOut)
async def cancel(message_id: str, client: Sdk) -> CancelledOut | JSONResponse:
    """Cancel a pending message."""
    current = await client.status(message_id)
    if current.state == "unknown":
        return error_response(404, "id", "unknown", f"no message {message_id} is known")
    if current.state in ("delivered", "rejected") or not await client.cancel(message_id):
        return error_response(
            409, "id", current.state, f"message {message_id} is already {current.state}"
        )
    return CancelledOut(id=message_id)


@router.patch("/v1/messages/{message_id}", response_model=RescheduledOut)
async def reschedule(
    message_id: str, when: RescheduleIn, client: Sdk
) -> RescheduledOut | JSONResponse:
    """Move a pending message to a new time: a copy under a new id, delivered once then;
    the old one never is."""
    try:
        new_id = await client.reschedule(message_id, **when.when())
    except MessageStateError as exc:
        status = 404 if exc.state == "unknown" else 409
        return error_response(status, "id", exc.state, str(exc))
    return rescheduled(new_id, message_id)


@router.delete("/v1/messages", response_model=CancelledByKeyOut)
async def cancel_key(topic: str, key: str, client: Sdk) -> CancelledByKeyOut:
    """Cancel every pending message of ``topic`` with producer ``key`` (up to 10,000 a
    call): a scan of the scheduler's state finds them, seconds at 1M pending."""
    return CancelledByKeyOut(cancelled=await client.cancel_key(topic, key))


@router.patch("/v1/messages", response_model=RescheduledByKeyOut)
async def reschedule_key(
    topic: str, key: str, when: RescheduleIn, client: Sdk
) -> RescheduledByKeyOut:
    """Reschedule every pending message of ``topic`` with producer ``key`` (up to 10,000
    a call), found as ``DELETE /v1/messages`` finds them."""
    moved = await client.reschedule_key(topic, key, **when.when())
    return RescheduledByKeyOut(
        rescheduled=[rescheduled(new_id, old_id) for old_id, new_id in moved.items()]
    )
