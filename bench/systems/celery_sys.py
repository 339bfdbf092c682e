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
        app.conf.broker_url = self.redis_url

    def worker_args(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "bench.systems.celery_sys", "worker",
                "--concurrency", "2", "--loglevel", "WARNING"]  # fmt: skip

    def schedule(self, jobs: Sequence[Job]) -> None:
        with app.producer_or_acquire() as producer:
            for job in jobs:
                deliver.apply_async(
                    args=[job.key],
                    eta=datetime.fromtimestamp(job.due_ms / 1000, tz=UTC),
                    producer=producer,
                )
