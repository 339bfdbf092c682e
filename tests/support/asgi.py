"""An HTTP client that calls the API app in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI


@asynccontextmanager
async def asgi_client(app: FastAPI, base_url: str = "") -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of ``app``, within the app's lifespan: the app's Redis client
    closes at the end, as it does under uvicorn (httpx's transport runs no lifespan)."""
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=base_url) as http,
    ):
        yield http
