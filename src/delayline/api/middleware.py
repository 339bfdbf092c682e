"""ASGI middleware: the Host allow-list, bearer-token auth, JSON request bodies, and a
request size limit.

Each answers with the API's error body before a route (or FastAPI's own
parsing) sees the request.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Collection
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Routes reachable without the token: health checks come from load balancers.
OPEN_PATHS = frozenset({"/healthz"})
#: The cookie that carries the token for the dashboard's own reads (GET only).
TOKEN_COOKIE = "delayline_token"
#: The routes that take the token in their query, to set that cookie: the pages.
LOGIN_PATHS = frozenset({"/ui", "/ui/manager"})
#: The header the pages add to a write, with which the cookie stands for the token on
#: any method: no other site's page can send it (a custom header needs the API's
#: consent in a CORS preflight, which it never gives).
PAGE_HEADER = b"x-delayline-page"
#: The names a request may reach the API by, unless told otherwise: loopback only, so
#: that a web page cannot rebind its own name to 127.0.0.1 and read the API.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: An allow-list entry that lets any Host through.
ANY_HOST = "*"
#: Methods whose body a route reads: JSON only, so that no cross-site form can send one.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


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


def host_name(host: str) -> str:
    """The name in a Host header, without its port or an IPv6 address's brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class HostAllowList:
    """Answer 400 to a request whose Host is not one of ``hosts`` (ANY_HOST: any)."""

    def __init__(self, app: ASGIApp, hosts: Collection[str]) -> None:
        self.app = app
        self._hosts = frozenset(host_name(host) for host in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A load balancer checks /healthz by address, and it tells nothing secret.
        if (
            scope["type"] == "http"
            and ANY_HOST not in self._hosts
            and scope["path"] not in OPEN_PATHS
        ):
            name = host_name(dict(scope["headers"]).get(b"host", b"").decode("latin-1"))
            if name not in self._hosts:
                message = (
                    f"this API is not served as {name or 'a request without Host'}; "
                    "its operator can allow the name with --allowed-hosts"
                )
                await _error(send, 400, "host", message, [])
                return
        await self.app(scope, receive, send)


class JsonBodies:
    """Answer 415 to a POST, PUT or PATCH whose Content-Type is not JSON: a form on
    another site can send a body without a preflight, but never as JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in BODY_METHODS:
            declared = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
            media_type = declared.partition(";")[0].strip().lower()
            if media_type != "application/json":
                message = (
                    f"the body must be JSON (Content-Type: application/json), not {declared!r}"
                )
                await _error(send, 415, "content-type", message, [])
                return
        await self.app(scope, receive, send)


#: Where the auth middleware leaves who asked, in the ASGI scope's ``state`` (which
#: Starlette's ``request.state`` reads): GROUP_STATE the group (None: the default
#: group's), ADMIN_STATE whether the caller holds the admin token.
GROUP_STATE = "delayline_group"
ADMIN_STATE = "delayline_admin"

#: Finds the group whose token a string is (None: no group's).
GroupFinder = Callable[[str], Awaitable[str | None]]


class BearerTokenAuth:
    """Tell who asks: the admin (``token``, the API's own), a group (its token, as
    delayline/groups.py made it), or, with no ``token`` set, anyone on the loopback.

    A token comes as ``Authorization: Bearer <token>`` on any route outside
    OPEN_PATHS. A browser cannot send that header when it opens a page: the
    dashboard takes the token once as ``/ui?token=...``, keeps it in an HttpOnly,
    SameSite=Strict cookie, and the cookie is accepted for GET requests, and for a
    write that carries PAGE_HEADER (which only the pages send), so that another site
    cannot make a browser write with it. A token that is neither
    the admin's nor a group's is refused with 401, and so is none when ``token``
    is set. Routes read the outcome from the scope's state (GROUP_STATE,
    ADMIN_STATE).
    """

    def __init__(self, app: ASGIApp, token: str | None, find_group: GroupFinder) -> None:
        self.app = app
        self._token = None if token is None else token.encode()
        self._find_group = find_group

    def _presented(self, scope: Scope) -> tuple[bytes | None, bool]:
        """The token the request carries, if any (the query and the cookie for GET, or
        with PAGE_HEADER), and whether it came in the page's cookie."""
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization")
        if authorization is not None:
            bearer = authorization.startswith(b"Bearer ")
            return (authorization.removeprefix(b"Bearer ") if bearer else b""), False
        if scope["method"] != "GET" and PAGE_HEADER not in headers:
            return None, False
        if scope["method"] == "GET" and scope["path"] in LOGIN_PATHS:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if "token" in query:
                # One token, the one the page then keeps in its cookie: never a second.
                tokens = query["token"]
                return (tokens[0].encode() if len(tokens) == 1 else b""), False
        try:
            cookie = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
        except CookieError:
            return b"", True
        morsel = cookie.get(TOKEN_COOKIE)
        return (None if morsel is None else morsel.value.encode()), True

    async def _identify(self, scope: Scope) -> tuple[bool, str | None, bool]:
        """(allowed, group, admin) for the request."""
        presented, from_cookie = self._presented(scope)
        if presented is None:
            return self._token is None, None, False
        if self._token is not None and hmac.compare_digest(presented, self._token):
            return True, None, True
        group = await self._find_group(presented.decode("latin-1")) if presented else None
        if group is None and from_cookie and self._token is None:
            # A cookie of an earlier run's token, on an API now open: as none.
            return True, None, False
        return group is not None, group, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            allowed, group, admin = await self._identify(scope)
            if not allowed:
                await _error(
                    send,
                    401,
                    "auth",
                    "a valid bearer token is required",
                    [(b"www-authenticate", b"Bearer")],
                )
                return
            state = scope.setdefault("state", {})
            state[GROUP_STATE], state[ADMIN_STATE] = group, admin
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
