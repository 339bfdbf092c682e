"""``bench schedules``' load: the schedules put, and the one-shot control's producer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from bench.schedule_mix import Spec, topic
from bench.soak import patiently
from delayline import Client
from delayline.plans import scheduling
from delayline.plans.producing import Published
from delayline.redis import keys
from delayline.schedules.runs import RUN_AT_HEADER, SCHEDULE_HEADER
from delayline.timing import format_time, now_ms

#: Schedules per pipeline.
PUT_CHUNK = 1_000
#: How far ahead the one-shot control sends (s): past the horizon (60 s).
LEAD_S = 65
#: Every run's body.
BODY = b"run"


def put(url: str, specs: Sequence[Spec], fast: int, on_busy: Callable[[], None]) -> dict[str, Any]:
    """Put ``specs``: the first ``fast`` one by one with ``Client.schedule`` (timed: the
    SDK's cost per call), the others PUT_CHUNK to a pipeline, each the very record the
    SDK writes (its definition checked by the SDK's ``definition_from``, its XADD from
    ``plans.scheduling.put``; a pipeline answered BUSY is sent again: a definition put
    twice changes nothing). Returns the timings and the scheduler's Redis shards."""
    began = time.perf_counter()
    with Client(url) as client:
        for spec in specs[:fast]:
            client.schedule(spec.name, spec.topic, BODY, **spec.arguments())
        sdk_s = time.perf_counter() - began
        raw = redis.Redis.from_url(url)
        published = Published(int(raw.hget(keys.CONFIG, "inbound_shards") or 1))
        began = time.perf_counter()
        for first in range(fast, len(specs), PUT_CHUNK):
            pipe = raw.pipeline(transaction=False)
            for spec in specs[first : first + PUT_CHUNK]:
                definition = scheduling.definition_from(
                    spec.name, spec.topic, BODY, limits=client.limits, **spec.arguments()
                )
                plan = scheduling.put(definition, now_ms=now_ms(), published=published)
                for command in plan.commands:  # redis-py 5 leaves it untyped, 8 types it
                    pipe.execute_command(*command)  # type: ignore[no-untyped-call,unused-ignore]
            patiently(pipe.execute, on_busy)
    piped = len(specs) - fast
    piped_s = time.perf_counter() - began
    return {
        "sdk_calls": fast,
        "sdk_s": round(sdk_s, 2),
        "sdk_us_per_call": round(sdk_s * 1e6 / max(fast, 1)),
        "pipelined": piped,
        "pipelined_s": round(piped_s, 2),
        "pipelined_us_each": round(piped_s * 1e6 / piped) if piped else None,
        "shards": published.shards,
    }


class OneShots(threading.Thread):
    """The one-shot control's producer: every second, one message per fast schedule
    due at the whole second LEAD_S ahead (past the horizon: through the scheduler's
    wheel, as runs are), sent with ``Client.send_many``, on that schedule's topic and
    with the headers its run would have, so that it is scored as that run."""

    def __init__(self, url: str, names: Sequence[str]) -> None:
        super().__init__(name="one-shots", daemon=True)
        self.url, self.names = url, names
        self.stopped = threading.Event()

    def run(self) -> None:
        with Client(self.url) as client:
            second = now_ms() // 1_000 + 1
            while not self.stopped.wait(max(0.0, second - now_ms() / 1_000)):
                due_ms = (second + LEAD_S) * 1_000
                headers = {RUN_AT_HEADER: format_time(due_ms)}
                client.send_many(
                    [
                        {"topic": topic(n), "body": BODY, "deliver_at": due_ms,
                         "headers": headers | {SCHEDULE_HEADER: name}}
                        for n, name in enumerate(self.names)
                    ]
                )  # fmt: skip
                second += 1
