"""The running service that end-to-end modules share when they need no settings of their
own: starting ``delayline run`` takes about 20 s, most of a module's time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
import redis

from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import free_port
from tests.support.harness import SchedulerProcess, Service

#: The shared service's horizon (``--horizon-ms``): a send due sooner takes the near path
#: into the outbox, a later one goes through Spark's wheel, so that one service has
#: both paths a few seconds apart.
SHORT_HORIZON_MS = 1_000


@pytest.fixture(scope="session")
def default_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Shared by the session: each test uses topics of its own, and reads counters as
    differences. Its own Redis, since the per-test fixtures flush theirs. Its
    settings are the defaults but for a 1 s horizon (SHORT_HORIZON_MS)."""
    data_dir = tmp_path_factory.mktemp("service-data")
    with (
        EmbeddedRedis(tmp_path_factory.mktemp("service-redis"), free_port()) as server,
        SchedulerProcess(
            [
                "--redis-url",
                server.url,
                "--no-api",
                "--data-dir",
                str(data_dir),
                "--horizon-ms",
                str(SHORT_HORIZON_MS),
            ]
        ) as scheduler,
        closing(redis.Redis.from_url(server.url)) as raw,
    ):
        yield Service(server.url, scheduler, raw)
