"""The running service that end-to-end modules share when they need no settings of their
own: starting ``delayline run`` takes about 20 s, most of a module's time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
import redis

from delayline.redis.embedded import EmbeddedRedis
from tests.e2e.harness import SchedulerProcess, Service
from tests.support import free_port


@pytest.fixture(scope="session")
def default_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Shared by the session: each test uses topics of its own, and reads counters as
    differences. Its own Redis, since the per-test fixtures flush theirs."""
    data_dir = tmp_path_factory.mktemp("service-data")
    with (
        EmbeddedRedis(tmp_path_factory.mktemp("service-redis"), free_port()) as server,
        SchedulerProcess(
            ["--redis-url", server.url, "--no-api", "--data-dir", str(data_dir)]
        ) as scheduler,
        closing(redis.Redis.from_url(server.url)) as raw,
    ):
        yield Service(server.url, scheduler, raw)
