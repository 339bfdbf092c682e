"""What the HTTP API's routes take besides their own parameters: the SDK client of
the app, and the window of due times that ``from`` and ``to`` give."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Query, Request

from delayline import timing
from delayline.async_client import AsyncClient
from delayline.moments import parse_moment_ms


def sdk(request: Request) -> AsyncClient:
    """The app's client, which ``create_app`` keeps in ``app.state.client``."""
    client: AsyncClient = request.app.state.client
    return client


#: A route parameter that takes the app's client.
Sdk = Annotated[AsyncClient, Depends(sdk)]

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
