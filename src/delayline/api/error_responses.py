"""The HTTP API's error bodies, ``{"error": {"field", "rule", "message"}}``, and the
status code of each delayline error: the one place the API turns errors into codes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from delayline.api.schemas import ErrorDetail, ErrorOut
from delayline.errors import (
    DelaylineError,
    ForbiddenError,
    GroupExistsError,
    GroupNotFoundError,
    QuotaError,
    ScheduleNotFoundError,
    SchedulerError,
    TransportError,
    ValidationError,
)

#: The error statuses every route may answer, for the OpenAPI schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 403, 404, 409, 413, 422, 429, 503)
}

#: The status of a send that a group's quota refused, by quota (docs/groups.md).
QUOTA_STATUS = {"topic_patterns": 403, "max_body_bytes": 413}


def error_response(status: int, field: str, rule: str, message: str) -> JSONResponse:
    """An error body with HTTP status ``status``."""
    return JSONResponse({"error": {"field": field, "rule": rule, "message": message}}, status)


def add_error_handlers(app: FastAPI) -> None:
    """Answer bad input with 422, a schedule or group unknown with 404, a group's name
    taken with 409, a quota passed with 403, 413 or 429 (QUOTA_STATUS), an unreachable
    Redis or a stopped scheduler with 503, and any other delayline error with 500;
    each with an error body."""

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

    @app.exception_handler(ScheduleNotFoundError)
    async def no_schedule(_: Request, exc: ScheduleNotFoundError) -> JSONResponse:
        return error_response(404, "name", "unknown", str(exc))

    @app.exception_handler(ForbiddenError)
    async def forbidden(_: Request, exc: ForbiddenError) -> JSONResponse:
        return error_response(403, "auth", "admin", str(exc))

    @app.exception_handler(QuotaError)
    async def over_quota(_: Request, exc: QuotaError) -> JSONResponse:
        return error_response(QUOTA_STATUS.get(exc.quota, 429), exc.quota, "quota", str(exc))

    @app.exception_handler(GroupNotFoundError)
    async def no_group(_: Request, exc: GroupNotFoundError) -> JSONResponse:
        return error_response(404, "group", "unknown", str(exc))

    @app.exception_handler(GroupExistsError)
    async def group_taken(_: Request, exc: GroupExistsError) -> JSONResponse:
        return error_response(409, "group", "exists", str(exc))

    @app.exception_handler(DelaylineError)
    async def failed(_: Request, exc: DelaylineError) -> JSONResponse:
        return error_response(500, "server", "error", str(exc))
