"""Sampling a system's processes (RSS, CPU) and scoring its receipts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil


class Sampler:
    """Samples the summed memory and CPU time of process trees every ``interval_s``.

    Memory is PSS (proportional set size): pages shared between processes (a
    forked worker and its parent) count once, split between them, so forking
    systems (PySpark's daemon, Celery's prefork, rq) are not over-counted.

    Children are found at every sample (Spark forks Python workers as it goes).
    CPU time counts from the sampler's start: a process that existed before is
    measured from its first sample, one born later from zero; the last value
    seen before a process exits is kept.
    """

    def __init__(self, roots: Iterable[int], interval_s: float = 0.5) -> None:
        self.roots = list(roots)
        self.interval_s = interval_s
        self.timeline: list[tuple[float, float]] = []  # (seconds since start, rss MB)
        self._cpu_s: dict[int, float] = {}
        self._cpu_base_s: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()
        self._started_epoch = time.time()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    @property
    def peak_rss_mb(self) -> float:
        return max((rss for _, rss in self.timeline), default=0.0)

    @property
    def cpu_s(self) -> float:
        return sum(used - self._cpu_base_s.get(pid, 0.0) for pid, used in self._cpu_s.items())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        rss = 0
        for process in self._tree():
            try:
                rss += process.memory_full_info().pss
                times = process.cpu_times()
                used = times.user + times.system
                if process.pid not in self._cpu_s and process.create_time() < self._started_epoch:
                    self._cpu_base_s[process.pid] = used
                self._cpu_s[process.pid] = used
            except psutil.Error:
                continue
        self.timeline.append((time.monotonic() - self._started, rss / 2**20))

    def _tree(self) -> list[psutil.Process]:
        found: dict[int, psutil.Process] = {}
        for pid in self.roots:
            try:
                root = psutil.Process(pid)
                found[pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = child
            except psutil.Error:
                continue
        return list(found.values())


@dataclass
class Score:
    """How a system did on the tracked jobs of one workload. Times in ms."""

    expected: int
    received: int = 0
    early: int = 0
    lost: int = 0
    duplicates: int = 0
    lateness_ms: list[int] = field(default_factory=list)

    def percentile(self, fraction: float) -> int | None:
        if not self.lateness_ms:
            return None
        ordered = sorted(self.lateness_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    def summary(self) -> dict[str, object]:
        return {
            "expected": self.expected,
            "received": self.received,
            "early": self.early,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "lateness_p50_ms": self.percentile(0.50),
            "lateness_p99_ms": self.percentile(0.99),
            "lateness_max_ms": max(self.lateness_ms, default=None),
        }


def score(due_ms: dict[str, int], receipts: dict[str, list[int]]) -> Score:
    """Lateness of each job's first receipt; early, lost and duplicate counts."""
    result = Score(expected=len(due_ms))
    for key, due in due_ms.items():
        times = receipts.get(key)
        if not times:
            result.lost += 1
            continue
        result.received += 1
        result.duplicates += len(times) - 1
        if min(times) < due:
            result.early += 1
        result.lateness_ms.append(min(times) - due)
    return result
