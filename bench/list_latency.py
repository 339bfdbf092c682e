"""How long the forecast and a listing take with ``pending`` messages in a running scheduler.

Starts ``delayline run`` (embedded Redis on ``port``), sends ``pending``
messages due 1 to 2 hours ahead with the SDK (each with its own producer key,
``order-<n>``), waits until the scheduler has counted them and committed a
batch after, then times, ``repeats`` times each (the median is kept), through
the SDK:

- the forecast over the whole window, by minute (counters: no scan);
- a listing of the first 100 by due time (a scan of the whole state);
- a listing by producer key, the needle in the haystack ("by key");
- a listing of a topic that has none (the scan, and nothing to return).
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.systems.processes import kill_group, start_delayline_run
from delayline import Client
from delayline.timing import now_ms

TOPIC = "bench.orders"
#: Spark's cold start on 2 cores, with room.
START_TIMEOUT_S = 300
#: Longest wait for the scheduler to count what was sent (s).
ABSORB_TIMEOUT_S = 900


def timed(call: Any, repeats: int) -> tuple[float, Any]:
    """The median wall time of ``call()`` in s, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def main(pending: int, port: int, repeats: int = 3) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="delayline-bench-listing-"))
    process, url = start_delayline_run(workdir, port, START_TIMEOUT_S)
    try:
        rng = random.Random(11)
        began = time.monotonic()
        with Client(url) as client:
            for start in range(0, pending, 10_000):
                stamp = now_ms()
                client.send_many(
                    [
                        {
                            "topic": TOPIC,
                            "body": b"x" * 64,
                            "deliver_at": stamp + rng.randint(3_600_000, 7_200_000),
                            "key": f"order-{n}",
                        }
                        for n in range(start, min(pending, start + 10_000))
                    ]
                )
            sent_s = time.monotonic() - began
            deadline = time.monotonic() + ABSORB_TIMEOUT_S
            while client.pending().total < pending and time.monotonic() < deadline:
                time.sleep(1)
            absorbed_s = time.monotonic() - began
            # The listing reads the last committed batch: let a few more run.
            time.sleep(10)
            needle = f"order-{pending // 2}"
            queries = {
                "forecast, whole window by minute": lambda: client.pending().total,
                "list the first 100": lambda: len(client.list_pending(limit=100)),
                "list by key": lambda: len(client.list_pending(key=needle)),
                "list a topic with none": lambda: len(client.list_pending(topic="bench.none")),
            }
            results: dict[str, Any] = {}
            for name, query in queries.items():
                median_s, found = timed(query, repeats)
                results[name] = {"median_s": round(median_s, 3), "found": found}
        assert results["list by key"]["found"] == 1, results
        assert results["list the first 100"]["found"] == 100, results
        return {
            "pending": pending,
            "sent_s": round(sent_s, 1),
            "counted_s": round(absorbed_s, 1),
            "repeats": repeats,
            "queries": results,
            "command": f"python -m bench listing --pending {pending}",
        }
    finally:
        kill_group(process)
        shutil.rmtree(workdir, ignore_errors=True)
