"""What the HTTP API's routes take besides their own parameters: the SDK client of
the app (of the caller's group), the admin's, and the window of due times that
``from`` and ``to`` give."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Query, Request

from delayline import timing
from delayline.api.middleware import ADMIN_STATE, GROUP_STATE
from delayline.async_client import AsyncClient
from delayline.errors import ForbiddenError
from delayline.groups import token_digest
from delayline.moments import parse_moment_ms


def sdk(request: Request) -> AsyncClient:
    """The app's client, which ``create_app`` keeps in ``app.state.client``, acting for
    the group whose token the request carries (middleware.BearerTokenAuth)."""
    client: AsyncClient = request.app.state.client
    group: str | None = getattr(request.state, GROUP_STATE, None)
    if group is None:
        return client
    clients: dict[str, AsyncClient] = request.app.state.group_clients
    if group not in clients:
        clients[group] = client.for_group(group)
    return clients[group]


def admin(request: Request) -> AsyncClient:
    """The app's client, for a caller with the admin token. Raises ForbiddenError for
    any other (a group's token, or none on an API started without a token)."""
    if not getattr(request.state, ADMIN_STATE, False):
        raise ForbiddenError(
            "the Manager's routes need the admin token (the API's --api-token, or "
            "DELAYLINE_API_TOKEN), not a group's"
        )
    client: AsyncClient = request.app.state.client
    return client


#: How long the API goes by a token's group once it found it (s).
TOKEN_CACHE_S = 10.0
#: The most tokens it remembers at once.
TOKEN_CACHE_SIZE = 1_000


class GroupTokens:
    """Finds the group whose token a string is, through ``client``; remembers a found
    one for TOKEN_CACHE_S (a token is never taken back, but a quota may change)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._known: dict[str, tuple[str, float]] = {}

    async def __call__(self, token: str) -> str | None:
        digest = token_digest(token)
        known = self._known.get(digest)
        if known is not None and time.monotonic() < known[1]:
            return known[0]
        group = await self._client.group_of_token(token)
        if group is not None:
            if len(self._known) >= TOKEN_CACHE_SIZE:
                self._known.clear()
            self._known[digest] = (group, time.monotonic() + TOKEN_CACHE_S)
        return group


def client_for(admin: AsyncClient, group: str) -> AsyncClient:
    """The admin's client acting for ``group``."""
    return admin.for_group(group)


#: A route parameter that takes the app's client, of the caller's group.
Sdk = Annotated[AsyncClient, Depends(sdk)]
#: A route parameter that takes the app's client for the admin; 403 for anyone else.
Admin = Annotated[AsyncClient, Depends(admin)]

#: What ``from`` and ``to`` take.
TIME_FORMS = "RFC 3339, epoch ms, or a duration from now (2h)"


def moment(text: str | None, field: str) -> datetime | None:
    """A query parameter's time (RFC 3339, epoch ms, or a duration from now) as an aware
    datetime; None if absent. Raises ValidationError naming ``field``."""
    if text is None:
        return None
    return timing.from_epoch_ms(parse_moment_ms(text, field, now_ms=timing.now_ms()))


@dataclass(frozen=True)
class Window:
    """A window of due times, ``[start, end)``; None is open on that side."""

    start: datetime | None
    end: datetime | None


def window(
    start: str | None = Query(None, alias="from", description=f"{TIME_FORMS}; open if absent"),
    end: str | None = Query(None, alias="to", description=f"{TIME_FORMS}; excluded"),
) -> Window:
    """The ``from`` and ``to`` query parameters of a route that takes a window (a
    dependency). Raises ValidationError naming the parameter."""
    return Window(moment(start, "from"), moment(end, "to"))


#: A route parameter that takes ``from`` and ``to`` as a :class:`Window`.
DueWindow = Annotated[Window, Depends(window)]
