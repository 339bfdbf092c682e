"""A server that accepts connections and never answers is an outage, not a hang: the
health check says 503 within 2 s, and the CLI (the SDK beneath it) fails with one
clear line within its read timeout."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

from delayline.api.app import create_app
from delayline.cli import main
from delayline.redis.connection import READ_TIMEOUT_S
from tests.support.asgi import asgi_client


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A Redis URL whose server accepts connections, reads nothing and answers nothing."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    finally:
        done.set()
        acceptor.join(5)
        for connection in held:
            connection.close()
        listener.close()


def test_the_health_check_answers_503_within_2_s(silent_url: str) -> None:
    async def check() -> httpx.Response:
        async with asgi_client(create_app(silent_url), base_url="http://127.0.0.1") as http:
            return await http.get("/healthz")

    began = time.monotonic()
    response = asyncio.run(check())
    assert time.monotonic() - began < 2.0
    assert response.status_code == 503
    assert response.json()["error"] == "Redis is unavailable"


def test_the_cli_gives_up_within_the_read_timeout(silent_url: str) -> None:
    # Through the SDK, with its default patience (5 s), which counts the first
    # attempt's wait: one read timeout in all, not one and then the patience again.
    began = time.monotonic()
    result = CliRunner().invoke(main, ["stats"], env={"DELAYLINE_REDIS_URL": silent_url})
    assert time.monotonic() - began < READ_TIMEOUT_S + 3
    assert result.exit_code == 1, result.output
    assert "Redis is unreachable" in result.output
    assert "Traceback" not in result.output
