"""``/v1/schedules``: put, pause, resume and delete a recurring schedule, addressed by
its topic and name; list schedules, show one, preview its next runs.

Each change writes one record to the inbound stream, which the scheduler applies in
its next batch. Each read asks the running scheduler for a scan of its state (an
operator's tool: seconds, on the scheduler's cores), as the SDK's listings do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from delayline import timing
from delayline.api.dependencies import Sdk
from delayline.api.schedule_schemas import (
    NAME_PATTERN,
    ListedScheduleOut,
    NextRunsOut,
    ScheduleChangeOut,
    ScheduleIn,
    ScheduleOut,
    SchedulesOut,
)
from delayline.api.schemas import TOPIC_PATTERN, ErrorOut
from delayline.async_client import AsyncClient
from delayline.client_base import MAX_PREVIEW
from delayline.listing import MAX_LIMIT

router = APIRouter()

#: The route of one schedule.
SCHEDULE = "/v1/schedules/{topic}/{name}"
#: What every route of a schedule says of when it takes effect.
APPLIED = (
    "The change travels as one record through the inbound stream: the scheduler applies "
    "it in its next batch, within about a second, in order with the schedule's other "
    "changes."
)

#: What every read of schedules says of what it costs and sees.
SCANNED = (
    "The running scheduler scans its state for the answer (an operator's tool: seconds, "
    "on the scheduler's cores; not for polling), as of its last committed batch: a "
    "schedule put a moment ago shows once the scheduler's next batch has it, within about "
    "a second. 503 if no scheduler is running."
)
#: A read of one schedule that the scheduler's state does not hold.
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorOut,
        "description": "No such schedule in the scheduler's state (never put, deleted, or "
        'put a moment ago): {"error": {"field": "name", "rule": "unknown", ...}}.',
    }
}

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


@router.get(
    "/v1/schedules",
    response_model=SchedulesOut,
    summary="List recurring schedules",
    description="The recurring schedules of a topic (of every topic without one), the "
    "first limit by topic, then name: each one's definition, its state (active, paused or "
    f"finished), its next and last run, the runs sent and skipped. {SCANNED}",
)
async def list_schedules(
    client: Sdk,
    topic: str | None = Query(None, description="Only this topic's schedules."),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
) -> SchedulesOut:
    rows = await client.schedules(topic=topic, limit=limit)
    return SchedulesOut(schedules=[ListedScheduleOut.of(row) for row in rows])


@router.get(
    SCHEDULE,
    response_model=ListedScheduleOut,
    responses=NOT_FOUND,
    summary="Show a recurring schedule",
    description="The schedule's definition (in the terms of a PUT), its state, its next "
    f"and last run, the runs sent and skipped, as GET /v1/schedules lists it. {SCANNED}",
)
async def get_schedule(topic: Topic, name: Name, client: Sdk) -> ListedScheduleOut:
    return ListedScheduleOut.of(await client.get_schedule(name, topic))


@router.get(
    f"{SCHEDULE}/next",
    response_model=NextRunsOut,
    responses=NOT_FOUND,
    summary="Preview a recurring schedule's next runs",
    description="The next n run times after now of the stored definition, in UTC and on "
    "the wall clock of its zone, within its start, its end and the max_runs it has left "
    "(fewer, or none, near its end); for a paused schedule, the runs to come once it is "
    f"resumed. Runs nothing. {SCANNED}",
)
async def next_runs(
    topic: Topic,
    name: Name,
    client: Sdk,
    n: int = Query(10, ge=1, le=MAX_PREVIEW, description="How many runs."),
) -> NextRunsOut:
    listed = await client.get_schedule(name, topic)
    return NextRunsOut.of(listed, listed.upcoming(n, timing.now_ms()))


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
