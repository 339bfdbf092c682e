"""ASGI middleware: bearer-token auth and a request size limit.

Both answer with the API's error body before a route (or FastAPI's own
parsing) sees the request.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Routes reachable without the token: health checks come from load balancers.
OPEN_PATHS = frozenset({"/healthz"})


async def _error(
    send: Send, status: int, rule: str, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps({"error": {"field": "request", "rule": rule, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerTokenAuth:
    """Require ``Authorization: Bearer <token>`` on every route outside OPEN_PATHS."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await _error(
                    send,
                    401,
                    "auth",
                    "a valid bearer token is required",
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        await self.app(scope, receive, send)


class RequestSizeLimit:
    """Refuse request bodies over ``max_bytes`` with 413, whether or not Content-Length says so."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _BodyTooLargeError
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLargeError:
            if not started:
                await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        await _error(send, 413, "max_bytes", f"request body over {self.max_bytes} bytes", [])


class _BodyTooLargeError(Exception):
    """Raised inside the app when the body passes the limit mid-stream."""
