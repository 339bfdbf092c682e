"""``python -m bench rate-limit``: a topic limited to ``rate`` deliveries a second, and a
herd of ``herd`` messages due at one instant (issue 33).

Starts ``delayline run`` (its defaults: the embedded Redis with AOF; no API),
sets the topic's limit with the SDK, then sends the herd due ``lead_s`` ahead,
and ``wave`` more due one second after it: they must all go after the herd,
earliest due first. With the default lead (75 s, more than the 60 s horizon)
they go through the scheduler's wheel before the outbox, as a herd sent ahead
does. Once every message is in the topic (read back with XRANGE, so no
consumer's cost weighs on it), it scores the topic entries: the delivery rate
over the herd's span and per whole second, due order, early, lost and
duplicated, lateness; and samples the CPU and PSS of every process of
``delayline run``'s tree over the delivery (bench.measure.Sampler).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import redis

from bench.measure import Sampler
from bench.soak import percentile
from bench.systems.processes import kill_group, start_delayline_run
from delayline import Client
from delayline.timing import now_ms

TOPIC = "bench.limited"
#: Spark's cold start on 2 cores, with room.
START_TIMEOUT_S = 300
#: How far off the rate may be (the issue's ±10%).
TOLERANCE = 0.10


def main(rate: int, herd: int, wave: int, lead_s: float, port: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="delayline-bench-rate-"))
    process, url = start_delayline_run(workdir, port, START_TIMEOUT_S)
    try:
        with Client(url) as client:
            client.set_topic_limit(TOPIC, rate_per_s=rate)
            due_ms = now_ms() + round(lead_s * 1000)
            sent = _send(client, herd, due_ms) + _send(client, wave, due_ms + 1_000)
        raw = redis.Redis.from_url(url)
        expected_s = (herd + wave) / rate
        deadline = time.monotonic() + lead_s + expected_s * 2 + 60
        with Sampler([process.pid]) as sampler:
            while raw.xlen(TOPIC) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.5)
        read = cast(list[tuple[bytes, dict[bytes, bytes]]], raw.xrange(TOPIC))
        entries = [
            (f[b"id"].decode(), int(f[b"deliver_at_ms"]), int(f[b"delivered_at_ms"]))
            for _, f in read
        ]
        return {
            "benchmark": "rate-limit",
            "command": f"python -m bench rate-limit --rate {rate} --herd {herd} --wave {wave} "
            f"--lead-s {lead_s:g}",
            "params": {"rate_per_s": rate, "herd": herd, "wave": wave, "lead_s": lead_s},
            "score": score(entries, sent, rate, herd, due_ms),
            "cpu_s": round(sampler.cpu_s, 2),
            "wall_s": round(sampler.wall_s, 1),
            "pss_peak_mb": round(sampler.peak_pss_mb, 1),
            "processes": sampler.processes(),
        }
    finally:
        kill_group(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _send(client: Client, count: int, due_ms: int) -> list[str]:
    ids: list[str] = []
    for first in range(0, count, 10_000):
        n = min(10_000, count - first)
        ids += client.send_many([{"topic": TOPIC, "body": b"x" * 64, "deliver_at": due_ms}] * n)
    return ids


def score(
    entries: list[tuple[str, int, int]], sent: list[str], rate: int, herd: int, due_ms: int
) -> dict[str, Any]:
    """What the topic entries (id, due ms, delivered ms, in stream order) say of the
    limit: the herd's rate, each whole second's count, due order, early, lost, doubled."""
    ids = [entry[0] for entry in entries]
    dues = [entry[1] for entry in entries]
    times = [entry[2] for entry in entries]
    late = sorted(t - due for _, due, t in entries)
    herd_times = sorted(t for _, due, t in entries if due == due_ms)[:herd]
    span_ms = herd_times[-1] - herd_times[0] if len(herd_times) > 1 else 0
    measured = (len(herd_times) - 1) * 1000 / span_ms if span_ms else None
    per_second = Counter((t - times[0]) // 1000 for t in times) if times else Counter()
    full = [per_second[s] for s in sorted(per_second)[1:-1]]  # whole seconds only
    return {
        "delivered": len(entries),
        "lost": len(set(sent) - set(ids)),
        "duplicated": len(ids) - len(set(ids)),
        "early": sum(1 for _, due, t in entries if t < due),
        "in_due_order": dues == sorted(dues),
        "herd_rate_per_s": None if measured is None else round(measured, 1),
        "rate_error": None if measured is None else round(measured / rate - 1, 4),
        "within_tolerance": measured is not None and abs(measured / rate - 1) <= TOLERANCE,
        "per_whole_second": {"min": min(full, default=0), "max": max(full, default=0)},
        "herd_span_ms": span_ms,
        "lateness_ms": {
            "p50": percentile(late, 0.50),
            "p99": percentile(late, 0.99),
            "max": late[-1] if late else None,
        },
    }
