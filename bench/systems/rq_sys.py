"""rq: ``Queue.enqueue_at`` into rq's ScheduledJobRegistry, moved by the workers' scheduler.

Settings (everything else is rq's default):
- broker: Redis, URL passed to ``rq worker --url``; queue ``default``.
- workers: two ``rq worker --with-scheduler --logging_level WARNING`` (one job at a time each).
- scheduler interval 1 s, scheduler lock TTL 61 s, maintenance interval 600 s: defaults.
- job fork per job (rq.worker.Worker), result_ttl 500 s: defaults.
- producer: ``enqueue_at(..., pipeline=pipe)``, one pipeline per 1,000 jobs.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

import redis
from rq import Queue, Worker

from bench.systems.base import Job, System, record_receipt
from bench.systems.probe import START_TIMEOUT_S, wait_consuming
from bench.systems.processes import fresh_log, kill_group, spawn, terminate
from delayline.testing import wait_for

WORKERS = 2
BATCH = 1_000


def deliver(key: str) -> None:
    """The delayed job: its receipt is the delivery."""
    record_receipt(key)


class RqSystem(System):
    name = "rq"

    def start(self) -> None:
        self._connection = redis.Redis.from_url(self.redis_url)
        self._queue = Queue(connection=self._connection)
        self._spawn_workers()
        wait_consuming(self, self._workers)

    def _spawn_workers(self) -> None:
        self._workers: list[subprocess.Popen[bytes]] = []
        for n in range(WORKERS):
            log = fresh_log(self.workdir / f"worker{n}.log")
            self._workers.append(
                spawn(
                    [
                        sys.executable,
                        "-m",
                        "rq.cli",
                        "worker",
                        "--with-scheduler",
                        "--url",
                        self.redis_url,
                        "--logging_level",
                        "WARNING",
                    ],
                    env=self.child_env(),
                    log=log,
                )
            )

    def schedule(self, jobs: Sequence[Job]) -> None:
        for start in range(0, len(jobs), BATCH):
            with self._connection.pipeline() as pipe:
                for job in jobs[start : start + BATCH]:
                    self._queue.enqueue_at(
                        datetime.fromtimestamp(job.due_ms / 1000, tz=UTC),
                        deliver,
                        job.key,
                        pipeline=pipe,
                    )
                pipe.execute()

    def pids(self) -> list[int]:
        return [worker.pid for worker in self._workers]

    def kill(self) -> None:
        for worker in self._workers:
            kill_group(worker)

    def restart(self) -> None:
        """Start the workers again; return once each has registered itself in Redis."""
        self._spawn_workers()
        started = set(self.pids())

        def registered() -> bool:
            if started <= {worker.pid for worker in Worker.all(connection=self._connection)}:
                return True
            for worker in self._workers:
                if worker.poll() is not None:
                    raise RuntimeError(f"{worker.args!r} exited; see {self.workdir}")
            return False

        wait_for(registered, START_TIMEOUT_S, "the rq workers to register", interval_s=0.2)

    def stop(self) -> None:
        for worker in self._workers:
            terminate(worker)
        self._connection.close()
