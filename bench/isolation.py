"""``python -m bench isolation``: group A's herd of ``herd`` messages due in one second,
while group B sends a steady ``rate`` messages a second (issue 33).

Two scenarios, each on a fresh ``delayline run`` (its defaults: the embedded Redis
with AOF; no API), in this order:

- ``lanes``: A and B are groups of their own, so each has its own outbox and pump;
- ``one lane``: B's topic is in A's group, so its messages share A's outbox, as
  every message did before groups (the control).

In each, a producer thread sends B's messages ``rate`` a second (each due
B_DELAY_MS after it is sent, 1 ms apart within a tenth of a second), from
``steady_s`` before the herd's instant until the herd is delivered and
``steady_s`` more. A consumer group that reads nothing holds each topic's entries
against its retention (100,000 entries by default), so that all can be scored.
A's herd is sent ahead through the SDK's near path (due ``lead_s`` later, within
the 60 s horizon), in one second: its due times are
spread over ``[T, T + 1 s)``. Once every message is in its topic (read back with
XRANGE: no consumer's cost weighs on it), it scores each topic's entries by
Redis's clock (the entry id's ms, less the id's due time): B's lateness while the
herd was being delivered (its due times from T to the herd's last delivery), A's
drain time, and for both early, lost and duplicated; and samples the CPU and PSS
of every process of ``delayline run``'s tree (bench.measure.Sampler) over the herd.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import redis

from bench.measure import Sampler
from bench.soak import percentile
from bench.systems.processes import kill_group, start_delayline_run
from delayline import Client
from delayline.testing import wait_for
from delayline.timing import now_ms

START_TIMEOUT_S = 300
#: B's messages are due this long after they are sent (ms): the near path.
B_DELAY_MS = 1_000
#: B sends a batch this often (s).
B_TICK_S = 0.1
SCENARIOS = ("lanes", "one lane")


def main(herd: int, rate: int, lead_s: float, steady_s: float, port: int) -> dict[str, Any]:
    return {
        "benchmark": "isolation",
        "command": f"python -m bench isolation --herd {herd} --rate {rate} --lead-s {lead_s:g}",
        "params": {"herd": herd, "rate_per_s": rate, "lead_s": lead_s, "steady_s": steady_s},
        "scenarios": {
            name: scenario(name, herd, rate, lead_s, steady_s, port) for name in SCENARIOS
        },
    }


def scenario(
    name: str, herd: int, rate: int, lead_s: float, steady_s: float, port: int
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="delayline-bench-isolation-"))
    process, url = start_delayline_run(workdir, port, START_TIMEOUT_S)
    try:
        with Client(url) as admin:
            admin.create_group("a")
            admin.create_group("b")
        a_topic, b_client_group = "a/herd", "b" if name == "lanes" else "a"
        b_topic = f"{b_client_group}/steady"
        raw = redis.Redis.from_url(url)
        for topic in (a_topic, b_topic):
            # A consumer group that reads nothing keeps the topic's retention from
            # trimming entries the score reads (past 100,000 an entry by default).
            raw.xgroup_create(topic, "bench", id="$", mkstream=True)
        _lanes_pumped(url, raw)
        due_ms = now_ms() + round(lead_s * 1000)
        steady = Steady(url, b_client_group, rate)
        sent_a = _send_herd(url, herd, due_ms)
        steady.start_at(due_ms - steady_s * 1000)
        with Sampler([process.pid]) as sampler:
            wait_for(lambda: raw.xlen(a_topic) >= len(sent_a), lead_s + 600, "the herd")
            herd_done_ms = now_ms()
            time.sleep(steady_s)
        steady.stop()
        wait_for(lambda: raw.xlen(b_topic) >= len(steady.sent), 60, "B's last messages")
        a_entries = _entries(raw, a_topic)
        b_entries = _entries(raw, b_topic)
        herd_end_ms = max(at for _, _, at in a_entries)
        during = [e for e in b_entries if due_ms <= e[1] <= herd_end_ms]
        return {
            "herd": _score(a_entries, sent_a)
            | {"drain_ms": herd_end_ms - due_ms, "seen_done_ms": herd_done_ms - due_ms},
            "steady": _score(b_entries, steady.sent),
            "steady_during_herd": _score(during, [e[0] for e in during]),
            "cpu_s": round(sampler.cpu_s, 2),
            "wall_s": round(sampler.wall_s, 1),
            "cpu_cores": round(sampler.cpu_s / max(sampler.wall_s, 1e-9), 3),
            "pss_peak_mb": round(sampler.peak_pss_mb, 1),
            "processes": sampler.processes(),
        }
    finally:
        kill_group(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _lanes_pumped(url: str, raw: redis.Redis) -> None:
    """Wait until the scheduler pumps both groups' lanes: a message of each delivered."""
    for group in ("a", "b"):
        with Client(url, group=group) as client:
            client.send("probe", b"p", delay=100)
        stream = f"{group}/probe"
        wait_for(lambda: raw.xlen(stream) == 1, 60, f"group {group}'s lane")  # noqa: B023


def _send_herd(url: str, count: int, due_ms: int) -> list[str]:
    """``count`` messages of group A due over the second from ``due_ms``."""
    ids: list[str] = []
    with Client(url, group="a") as client:
        for first in range(0, count, 10_000):
            batch = [
                {"topic": "herd", "body": b"x" * 64, "deliver_at": due_ms + (i * 1000) // count}
                for i in range(first, min(count, first + 10_000))
            ]
            ids += client.send_many(batch)
    return ids


class Steady:
    """B's producer: ``rate`` messages a second on its own thread, each due B_DELAY_MS
    after its batch is sent."""

    def __init__(self, url: str, group: str, rate: int) -> None:
        self.sent: list[str] = []
        self._url, self._group, self._rate = url, group, rate
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start_at(self, at_ms: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(at_ms,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self, at_ms: float) -> None:
        per_tick = round(self._rate * B_TICK_S)
        step_ms = B_TICK_S * 1000 / per_tick
        with Client(self._url, group=self._group) as client:
            self._stop.wait(max(0.0, (at_ms - now_ms()) / 1000))
            next_s = time.monotonic()
            while not self._stop.is_set():
                base_ms = now_ms() + B_DELAY_MS
                batch = [
                    {
                        "topic": "steady",
                        "body": b"y" * 64,
                        "deliver_at": base_ms + round(i * step_ms),
                    }
                    for i in range(per_tick)
                ]
                self.sent += client.send_many(batch)
                next_s += B_TICK_S
                self._stop.wait(max(0.0, next_s - time.monotonic()))


def _entries(raw: redis.Redis, topic: str) -> list[tuple[str, int, int]]:
    """(id, due ms, Redis's ms at delivery) of each entry of ``topic``."""
    read = cast(list[tuple[bytes, dict[bytes, bytes]]], raw.xrange(topic))
    return [
        (f[b"id"].decode(), int(f[b"deliver_at_ms"]), int(entry_id.split(b"-")[0]))
        for entry_id, f in read
    ]


def _score(entries: list[tuple[str, int, int]], sent: list[str]) -> dict[str, Any]:
    ids = [entry[0] for entry in entries]
    late = sorted(at - due for _, due, at in entries)
    return {
        "delivered": len(entries),
        "lost": len(set(sent) - set(ids)),
        "duplicated": len(ids) - len(set(ids)),
        "early": sum(1 for x in late if x < 0),
        "lateness_ms": {
            "p50": percentile(late, 0.50),
            "p99": percentile(late, 0.99),
            "max": late[-1] if late else None,
        },
    }
