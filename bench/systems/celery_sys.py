"""Celery: ``apply_async(eta=...)`` on a Redis broker; ETA tasks wait inside the worker.

Settings (everything else is Celery's default):
- broker: Redis (kombu's redis transport), URL from BENCH_SYSTEM_REDIS_URL; no result backend.
- worker: ``celery -A bench.systems.celery_sys worker --concurrency 2 --loglevel WARNING``.
- visibility_timeout 3600 s, worker_prefetch_multiplier 4, task_acks_late False: defaults.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from bench.systems.base import Job, record_receipt
from bench.systems.probe import READY_LINE
from bench.systems.worker import REDIS_URL_ENV, WorkerSystem

app = Celery("bench", broker=os.environ.get(REDIS_URL_ENV))
logger = logging.getLogger(__name__)


@app.task
def deliver(key: str) -> None:
    """The delayed job: its receipt is the delivery."""
    record_receipt(key)


@worker_ready.connect
def _announce_ready(**_: Any) -> None:
    logger.warning(READY_LINE)


class CelerySystem(WorkerSystem):
    name = "celery"

    def connect(self) -> None:
        # The app is module-wide and keeps its first broker for good: each session
        # sends through a connection of its own, to its own Redis.
        self._connection = app.connection_for_write(self.redis_url)
        self._producer = app.amqp.Producer(self._connection)

    def disconnect(self) -> None:
        self._producer.close()
        self._connection.release()

    def worker_args(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "bench.systems.celery_sys", "worker",
                "--concurrency", "2", "--loglevel", "WARNING"]  # fmt: skip

    def schedule(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            deliver.apply_async(
                args=[job.key],
                eta=datetime.fromtimestamp(job.due_ms / 1000, tz=UTC),
                producer=self._producer,
            )
