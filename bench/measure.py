"""Sampling a system's processes (PSS, CPU), reading receipts, and scoring them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import psutil
import redis

from bench.systems.base import RECEIPTS_KEY


def label(process: psutil.Process) -> str:
    """A short name for a process: ``java``, ``redis-server``, ``python -m <module>``."""
    try:
        args = process.cmdline()
        name = process.name()
    except psutil.Error:
        return "?"
    if "-m" in args[:-1]:
        at = args.index("-m") + 1
        words = [word for word in args[at : at + 2] if not word.startswith("-") and ":" not in word]
        return f"{name} -m {' '.join(words)}"
    return str(name)


class Sampler:
    """Samples the summed memory and CPU time of process trees every ``interval_s``.

    Memory is PSS (proportional set size, from /proc/<pid>/smaps_rollup through
    psutil): pages shared between processes (a forked worker and its parent)
    count once, split between them, so forking systems (PySpark's daemon,
    Celery's prefork, rq) are not over-counted.

    Children are found at every sample (Spark forks Python workers as it goes).
    CPU time counts from the sampler's start (a first sample is taken on entry):
    a process that existed before is measured from that sample, one born later
    from zero; the last value seen before a process exits is kept.
    """

    def __init__(self, roots: Iterable[int], interval_s: float = 0.5) -> None:
        self.roots = list(roots)
        self.interval_s = interval_s
        self.timeline: list[tuple[float, float]] = []  # (seconds since start, PSS MB)
        self._cpu_s: dict[int, float] = {}
        self._cpu_base_s: dict[int, float] = {}
        self._labels: dict[int, str] = {}
        self._peak: dict[int, float] = {}  # pid -> PSS MB, at the sample with the largest sum
        self._last: dict[int, float] = {}  # pid -> PSS MB, at the last sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()
        self._started_epoch = time.time()
        self.wall_s = 0.0

    def __enter__(self) -> Sampler:
        self._started = time.monotonic()
        self._started_epoch = time.time()
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self.wall_s = time.monotonic() - self._started

    @property
    def peak_pss_mb(self) -> float:
        return max((pss for _, pss in self.timeline), default=0.0)

    @property
    def last_pss_mb(self) -> float:
        return self.timeline[-1][1] if self.timeline else 0.0

    @property
    def cpu_s(self) -> float:
        return sum(used - self._cpu_base_s.get(pid, 0.0) for pid, used in self._cpu_s.items())

    def processes(self) -> list[dict[str, Any]]:
        """Every process seen: pid, label, PSS at the peak and at the end (MB), CPU s used."""
        rows = [
            {
                "pid": pid,
                "process": self._labels.get(pid, "?"),
                "pss_peak_mb": round(self._peak.get(pid, 0.0), 1),
                "pss_last_mb": round(self._last.get(pid, 0.0), 1),
                "cpu_s": round(used - self._cpu_base_s.get(pid, 0.0), 2),
            }
            for pid, used in self._cpu_s.items()
        ]
        return sorted(rows, key=lambda row: -row["pss_peak_mb"])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        pss: dict[int, float] = {}
        for process in self._tree():
            try:
                pss_mb = process.memory_full_info().pss / 2**20
                times = process.cpu_times()
                used = times.user + times.system
                if process.pid not in self._cpu_s:
                    self._labels[process.pid] = label(process)
                    if process.create_time() < self._started_epoch:
                        self._cpu_base_s[process.pid] = used
                self._cpu_s[process.pid] = used
                pss[process.pid] = pss_mb
            except psutil.Error:
                continue
        total = sum(pss.values())
        if total >= self.peak_pss_mb:
            self._peak = pss
        self._last = pss
        self.timeline.append((time.monotonic() - self._started, total))

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


class Receipts:
    """The receipts list, read incrementally: each call fetches only the new entries.

    Keeps each key's first receipt time and how many more came (duplicates).
    """

    #: Entries fetched per LRANGE.
    PAGE = 50_000

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.offset = 0
        self.first: dict[str, int] = {}
        self.extra: dict[str, int] = {}
        self.last_ms = 0

    def refresh(self) -> list[str]:
        """Read what arrived since the last call; returns the keys received for the first time."""
        fresh: list[str] = []
        while True:
            page = cast(
                list[bytes],
                self.client.lrange(RECEIPTS_KEY, self.offset, self.offset + self.PAGE - 1),
            )
            if not page:
                return fresh
            self.offset += len(page)
            for raw in page:
                key, _, stamp = raw.decode().partition(" ")
                received = int(stamp)
                self.last_ms = max(self.last_ms, received)
                known = self.first.get(key)
                if known is None:
                    self.first[key] = received
                    fresh.append(key)
                else:
                    self.extra[key] = self.extra.get(key, 0) + 1
                    self.first[key] = min(known, received)
            if len(page) < self.PAGE:
                return fresh


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

    def summary(self) -> dict[str, Any]:
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


def score(due_ms: Mapping[str, int], receipts: Receipts) -> Score:
    """Lateness of each job's first receipt; early, lost and duplicate counts."""
    result = Score(expected=len(due_ms))
    for key, due in due_ms.items():
        received = receipts.first.get(key)
        if received is None:
            result.lost += 1
            continue
        result.received += 1
        result.duplicates += receipts.extra.get(key, 0)
        if received < due:
            result.early += 1
        result.lateness_ms.append(received - due)
    return result
