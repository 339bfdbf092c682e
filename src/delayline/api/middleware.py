"""ASGI middleware: bearer-token auth and a request size limit.

Both answer with the API's error body before a route (or FastAPI's own
parsing) sees the request.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Routes reachable without the token: health checks come from load balancers.
OPEN_PATHS = frozenset({"/healthz"})
#: The cookie that carries the token for the dashboard's own reads (GET only).
TOKEN_COOKIE = "delayline_token"
#: The one route that takes the token in its query, to set that cookie.
LOGIN_PATH = "/ui"


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
    """Require ``Authorization: Bearer <token>`` on every route outside OPEN_PATHS.

    A browser cannot send that header when it opens a page: the dashboard takes
    the token once as ``/ui?token=...``, keeps it in an HttpOnly, SameSite=Strict
    cookie, and the cookie is accepted for GET requests only, so that another
    site cannot make a browser write with it.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()
        self._expected = b"Bearer " + self._token

    def _allowed(self, scope: Scope) -> bool:
        headers = dict(scope["headers"])
        if hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            return True
        if scope["method"] != "GET":
            return False
        if scope["path"] == LOGIN_PATH:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if "token" in query:
                return hmac.compare_digest(query["token"][0].encode(), self._token)
        try:
            cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        except CookieError:
            return False
        morsel = cookie.get(TOKEN_COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS and not self._allowed(scope):
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
