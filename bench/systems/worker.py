"""A system that is one worker process beside the harness's producer (Celery, dramatiq, arq).

The worker logs :data:`~bench.systems.probe.READY_LINE` once it consumes; a
restart waits for that line. The producer side lives in the harness process
and connects in :meth:`WorkerSystem.connect`.
"""

from __future__ import annotations

import subprocess
from abc import abstractmethod

from bench.systems.base import System
from bench.systems.probe import READY_LINE, START_TIMEOUT_S, wait_consuming
from bench.systems.processes import fresh_log, kill_group, spawn, terminate, wait_for_log

#: Where the worker finds its broker (the harness process connects on its own).
REDIS_URL_ENV = "BENCH_SYSTEM_REDIS_URL"


class WorkerSystem(System):
    """One worker process, started by ``worker_args()``, with the broker URL in its env."""

    _worker: subprocess.Popen[bytes]

    @abstractmethod
    def worker_args(self) -> list[str]:
        """The worker's command line."""

    def connect(self) -> None:
        """Open the producer's connection to ``redis_url`` (in the harness process)."""

    def disconnect(self) -> None:
        """Close what :meth:`connect` opened."""

    def start(self) -> None:
        self.connect()
        self._spawn_worker()
        wait_consuming(self, [self._worker])

    def _spawn_worker(self) -> None:
        self._log = fresh_log(self.workdir / "worker.log")
        env = self.child_env() | {REDIS_URL_ENV: self.redis_url}
        self._worker = spawn(self.worker_args(), env=env, log=self._log)

    def pids(self) -> list[int]:
        return [self._worker.pid]

    def kill(self) -> None:
        kill_group(self._worker)

    def restart(self) -> None:
        self._spawn_worker()
        wait_for_log(self._log, READY_LINE, START_TIMEOUT_S, self._worker)

    def stop(self) -> None:
        terminate(self._worker)
        self.disconnect()
