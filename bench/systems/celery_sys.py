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

from bench.systems.base import Job, System, record_receipt
from bench.systems.probe import READY_LINE, START_TIMEOUT_S, wait_consuming
from bench.systems.processes import kill_group, spawn, terminate, wait_for_log

#: Where the worker finds its broker (the harness process sets ``app.conf`` instead).
REDIS_URL_ENV = "BENCH_SYSTEM_REDIS_URL"

app = Celery("bench", broker=os.environ.get(REDIS_URL_ENV))
logger = logging.getLogger(__name__)


@app.task
def deliver(key: str) -> None:
    """The delayed job: its receipt is the delivery."""
    record_receipt(key)


@worker_ready.connect
def _announce_ready(**_: Any) -> None:
    logger.warning(READY_LINE)


class CelerySystem(System):
    name = "celery"

    def start(self) -> None:
        app.conf.broker_url = self.redis_url
        self._spawn_worker()
        wait_consuming(self, [self._worker])

    def _spawn_worker(self) -> None:
        env = self.child_env() | {REDIS_URL_ENV: self.redis_url}
        self._log = self.workdir / "worker.log"
        self._log.unlink(missing_ok=True)
        self._worker = spawn(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "bench.systems.celery_sys",
                "worker",
                "--concurrency",
                "2",
                "--loglevel",
                "WARNING",
            ],
            env=env,
            log=self._log,
        )

    def schedule(self, jobs: Sequence[Job]) -> None:
        with app.producer_or_acquire() as producer:
            for job in jobs:
                deliver.apply_async(
                    args=[job.key],
                    eta=datetime.fromtimestamp(job.due_ms / 1000, tz=UTC),
                    producer=producer,
                )

    def pids(self) -> list[int]:
        return [self._worker.pid]

    def kill(self) -> None:
        kill_group(self._worker)

    def restart(self) -> None:
        self._spawn_worker()
        wait_for_log(self._log, READY_LINE, START_TIMEOUT_S, self._worker)

    def stop(self) -> None:
        terminate(self._worker)
