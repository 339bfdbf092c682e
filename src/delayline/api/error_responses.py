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
    ScheduleNotFoundError,
    SchedulerError,
    TransportError,
    ValidationError,
)

#: The error statuses every route may answer, for the OpenAPI schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (401, 404, 409, 413, 422, 503)
}


def error_response(status: int, field: str, rule: str, message: str) -> JSONResponse:
    """An error body with HTTP status ``status``."""
    return JSONResponse({"error": {"field": field, "rule": rule, "message": message}}, status)


def add_error_handlers(app: FastAPI) -> None:
    """Answer bad input with 422, a schedule the scheduler does not hold with 404, an
    unreachable Redis or a stopped scheduler with 503, and any other delayline error
    with 500; each with an error body."""

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

    @app.exception_handler(DelaylineError)
    async def failed(_: Request, exc: DelaylineError) -> JSONResponse:
        return error_response(500, "server", "error", str(exc))
