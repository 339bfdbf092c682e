"""arq: ``enqueue_job(_defer_until=...)`` into arq's Redis sorted set, polled by the worker.

Settings (everything else is arq's default):
- broker: Redis, URL from BENCH_SYSTEM_REDIS_URL.
- worker: ``arq bench.systems.arq_sys.WorkerSettings --custom-log-dict <this module>.LOG_CONFIG``.
- log level: WARNING (LOG_CONFIG; arq's own config offers only INFO or DEBUG).
- max_jobs 10, poll_delay 0.5 s, keep_result 3600 s, job_timeout 300 s: defaults.
- producer: one ArqRedis pool, enqueues gathered 100 at a time (one connection each).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from arq import create_pool
from arq.connections import RedisSettings

from bench.systems.base import Job, record_receipt
from bench.systems.probe import READY_LINE
from bench.systems.worker import REDIS_URL_ENV, WorkerSystem

#: Enqueues in flight at once: each holds one pooled connection (WATCH/MULTI).
GATHER = 100

LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}

logger = logging.getLogger(__name__)


async def deliver(ctx: dict[str, Any], key: str) -> None:
    """The delayed job: its receipt is the delivery."""
    record_receipt(key)


async def announce_ready(ctx: dict[str, Any]) -> None:
    """arq's on_startup hook: runs just before the worker's poll loop."""
    logger.warning(READY_LINE)


class WorkerSettings:
    functions: ClassVar[list[Any]] = [deliver]
    on_startup = announce_ready
    redis_settings = RedisSettings.from_dsn(os.environ.get(REDIS_URL_ENV, "redis://localhost"))


class ArqSystem(WorkerSystem):
    name = "arq"

    def connect(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._pool = self._loop.run_until_complete(
            create_pool(RedisSettings.from_dsn(self.redis_url))
        )

    def disconnect(self) -> None:
        self._loop.run_until_complete(self._pool.aclose())
        self._loop.close()

    def worker_args(self) -> list[str]:
        return [sys.executable, "-m", "arq", "bench.systems.arq_sys.WorkerSettings",
                "--custom-log-dict", "bench.systems.arq_sys.LOG_CONFIG"]  # fmt: skip

    def schedule(self, jobs: Sequence[Job]) -> None:
        self._loop.run_until_complete(self._enqueue(jobs))

    async def _enqueue(self, jobs: Sequence[Job]) -> None:
        for start in range(0, len(jobs), GATHER):
            await asyncio.gather(
                *(
                    self._pool.enqueue_job(
                        "deliver",
                        job.key,
                        _defer_until=datetime.fromtimestamp(job.due_ms / 1000, tz=UTC),
                    )
                    for job in jobs[start : start + GATHER]
                )
            )
