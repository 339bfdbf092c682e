"""What every benchmarked system provides, and how its consumers report receipts.

A *job* is one delayed message: a unique key and an absolute due time. The
harness schedules jobs through the system's own producer API. The system's
consumer (or task body) calls :func:`record_receipt` the moment it receives a
job: that is "delivered", on one clock for every system. Receipts go to a
separate Redis (the *bench* Redis), so they do not count toward the system's
memory.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

#: Environment variable that tells consumer processes where to record receipts.
RECEIPTS_URL_ENV = "BENCH_RECEIPTS_URL"
#: The Redis list of receipts: "<key> <received_ms>" per delivery (duplicates included).
RECEIPTS_KEY = "bench:received"


@dataclass(frozen=True)
class Job:
    """One delayed message: ``key`` is unique within a run, ``due_ms`` epoch ms."""

    key: str
    due_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_receipts: redis.Redis | None = None


def record_receipt(key: str) -> None:
    """Record that ``key`` was received now: call it first thing in the task body."""
    record_receipts([key], now_ms())


def record_receipts(keys: Sequence[str], received_ms: int) -> None:
    """Record a batch of jobs received together at ``received_ms`` (one round trip)."""
    global _receipts
    if _receipts is None:
        _receipts = redis.Redis.from_url(os.environ[RECEIPTS_URL_ENV])
    if keys:
        _receipts.rpush(RECEIPTS_KEY, *(f"{key} {received_ms}" for key in keys))


class System(ABC):
    """A delayed-delivery system under test, run as child processes of the harness.

    ``redis_url`` is the system's own Redis (its memory is measured);
    ``receipts_url`` is where its consumers record receipts; ``workdir`` is a
    scratch directory for logs and state.
    """

    name: str

    def __init__(self, redis_url: str, receipts_url: str, workdir: Path) -> None:
        self.redis_url = redis_url
        self.receipts_url = receipts_url
        self.workdir = workdir

    @abstractmethod
    def start(self) -> None:
        """Start the scheduler/worker/consumer processes; return once they consume."""

    @abstractmethod
    def schedule(self, jobs: Sequence[Job]) -> None:
        """Schedule ``jobs`` through the system's producer API (from the harness process)."""

    def wait_absorbed(self, timeout_s: float) -> bool:
        """Return once what was scheduled is in the system's own store (True), or after
        ``timeout_s`` (False).

        The peers' producers write straight into their store; a system with an
        input log to digest first overrides this.
        """
        return True

    def backlog(self) -> dict[str, int]:
        """What the system reports about its queues, for the result files (may be empty)."""
        return {}

    @abstractmethod
    def pids(self) -> list[int]:
        """Top-level pids of the system's processes (children are found by the sampler)."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the scheduling/worker processes, as a crash would."""

    @abstractmethod
    def restart(self) -> None:
        """Start again what :meth:`kill` killed, on the same state; return once it runs."""

    @abstractmethod
    def stop(self) -> None:
        """Stop everything this system started (SIGTERM, then SIGKILL after a while)."""

    def child_env(self) -> dict[str, str]:
        """Environment for child processes: receipts URL, and the repo on PYTHONPATH."""
        repo = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env[RECEIPTS_URL_ENV] = self.receipts_url
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))
        return env


#: How the harness builds a system: (redis_url, receipts_url, workdir) -> System.
SystemFactory = Callable[[str, str, Path], System]
