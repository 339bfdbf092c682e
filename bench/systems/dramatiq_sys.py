"""dramatiq: ``send_with_options(delay=...)`` on a RedisBroker; the worker holds delayed messages.

Settings (everything else is dramatiq's default):
- broker: RedisBroker, URL from BENCH_SYSTEM_REDIS_URL; default middleware plus a "ready" log line.
- worker: ``dramatiq bench.systems.dramatiq_sys --processes 1 --threads 2``.
- log level: WARNING for the ``dramatiq`` loggers (the CLI offers only INFO or DEBUG).
- delay-queue prefetch 1000 per thread, worker_timeout 1000 ms, heartbeat_timeout 60 s: defaults.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

from bench.systems.base import Job, now_ms, record_receipt
from bench.systems.probe import READY_LINE
from bench.systems.worker import REDIS_URL_ENV, WorkerSystem

logger = logging.getLogger(__name__)
logging.getLogger("dramatiq").setLevel(logging.WARNING)


class AnnounceReady(Middleware):
    """Logs :data:`READY_LINE` once the worker's consumers are running."""

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        logger.warning(READY_LINE)


broker = RedisBroker(url=os.environ.get(REDIS_URL_ENV))
broker.add_middleware(AnnounceReady())
dramatiq.set_broker(broker)


@dramatiq.actor
def deliver(key: str) -> None:
    """The delayed job: its receipt is the delivery."""
    record_receipt(key)


class DramatiqSystem(WorkerSystem):
    name = "dramatiq"

    def connect(self) -> None:
        self._deliver = dramatiq.actor(deliver.fn, broker=RedisBroker(url=self.redis_url))

    def disconnect(self) -> None:
        self._deliver.broker.close()

    def worker_args(self) -> list[str]:
        return [sys.executable, "-m", "dramatiq", "bench.systems.dramatiq_sys",
                "--processes", "1", "--threads", "2"]  # fmt: skip

    def schedule(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self._deliver.send_with_options(args=(job.key,), delay=max(0, job.due_ms - now_ms()))
