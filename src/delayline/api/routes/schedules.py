"""``/v1/schedules``: put, pause, resume and delete a recurring schedule, addressed by
its topic and name. Each writes one record to the inbound stream, which the scheduler
applies in its next batch; reading schedules back comes with their listing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path

from delayline.api.dependencies import Sdk
from delayline.api.schedule_schemas import (
    NAME_PATTERN,
    ScheduleChangeOut,
    ScheduleIn,
    ScheduleOut,
)
from delayline.api.schemas import TOPIC_PATTERN, ErrorOut
from delayline.async_client import AsyncClient

router = APIRouter()

#: The route of one schedule.
SCHEDULE = "/v1/schedules/{topic}/{name}"
#: What every route of a schedule says of when it takes effect.
APPLIED = (
    "The change travels as one record through the inbound stream: the scheduler applies "
    "it in its next batch, within about a second, in order with the schedule's other "
    "changes."
)

#: A POST without a body still says Content-Type: application/json, which a form or a
#: fetch on another site cannot send without a preflight (api.middleware.JsonBodies).
JSON_ONLY: dict[int | str, dict[str, Any]] = {
    415: {
        "model": ErrorOut,
        "description": "The request does not say Content-Type: application/json (it needs no "
        "body): another site's form cannot pause or resume a schedule.",
    }
}


def address_part(description: str, example: str, pattern: str) -> Any:
    """A path parameter of a schedule's address; its pattern is for the schema only (the
    SDK's checks name the field that breaks it)."""
    return Path(description=description, examples=[example], json_schema_extra={"pattern": pattern})


Topic = Annotated[str, address_part("The topic each run is sent to.", "reports", TOPIC_PATTERN)]
Name = Annotated[
    str, address_part("The schedule's name, unique within its topic.", "nightly", NAME_PATTERN)
]


@router.put(
    SCHEDULE,
    response_model=ScheduleOut,
    response_model_exclude_none=True,
    summary="Put a recurring schedule",
    description="Create the schedule, or replace its definition: one record, so a replace "
    "is atomic. Answers the definition as stored. Putting the very same definition again "
    "changes nothing (a paused schedule stays paused), so an application may put its "
    "schedules every time it starts; a different one cancels the runs already handed to "
    "the outbox and not yet due. A new definition's first run is its first one after the "
    f"batch that reads it. {APPLIED} 422 names the field of a definition that breaks a "
    "rule, and nothing is written.",
)
async def put_schedule(
    topic: Topic, name: Name, definition: ScheduleIn, client: Sdk
) -> ScheduleOut:
    stored = await client.schedule(name, topic, definition.body_value(), **definition.arguments())
    return ScheduleOut.model_validate(stored.to_view())


#: What a change does, named as the SDK and the answer name it.
Action = Literal["pause", "resume", "delete"]


@dataclass(frozen=True)
class Change:
    """A route that pauses, resumes or deletes a schedule: it writes one record through
    ``call`` and answers 202."""

    method: str
    path: str
    summary: str
    description: str
    call: Callable[[AsyncClient, str, str], Awaitable[None]]


CHANGES: dict[Action, Change] = {
    "delete": Change(
        "DELETE",
        SCHEDULE,
        "Delete a recurring schedule",
        "No run is sent any more, and the runs already handed to the outbox and not yet due "
        f"are cancelled. {APPLIED} Deleting a schedule that does not exist does nothing.",
        AsyncClient.delete_schedule,
    ),
    "pause": Change(
        "POST",
        f"{SCHEDULE}/pause",
        "Pause a recurring schedule",
        "No run is sent until it is resumed, and the runs already handed to the outbox and "
        f"not yet due are cancelled. {APPLIED}",
        AsyncClient.pause,
    ),
    "resume": Change(
        "POST",
        f"{SCHEDULE}/resume",
        "Resume a paused recurring schedule",
        "The runs it missed while paused follow its catch_up policy (skip, latest or all). "
        f"{APPLIED}",
        AsyncClient.resume,
    ),
}


def add_change_route(action: Action, change: Change) -> None:
    """Add the route of ``change`` to the router."""

    async def answer(topic: Topic, name: Name, client: Sdk) -> ScheduleChangeOut:
        await change.call(client, name, topic)
        return ScheduleChangeOut(topic=topic, name=name, action=action)

    router.add_api_route(
        change.path,
        answer,
        methods=[change.method],
        name=f"{action}_schedule",
        status_code=202,
        response_model=ScheduleChangeOut,
        responses=JSON_ONLY if change.method == "POST" else None,
        summary=change.summary,
        description=change.description,
    )


for _action, _change in CHANGES.items():
    add_change_route(_action, _change)
