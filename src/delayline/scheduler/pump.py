"""The fine wheel: delivers outbox messages at their due time, by Redis's clock.

Spark's wheel is coarse (a batch every few hundred ms); it emits each message
``fire_lead_ms`` early into the outbox, a Redis sorted set by due time. This
thread moves each one to its topic when Redis's clock reaches it, with one Lua
script call at a time (atomic: a message is delivered once, even with several
pumps). The outbox holds only about rate times lead messages.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from delayline.errors import TransportError
from delayline.transports.redis_streams import RedisStreams

#: Most messages one pump call moves.
PUMP_BATCH = 1_000
#: Longest sleep between calls (s): a new message may be due sooner than the next known one.
MAX_IDLE_S = 0.005


class Pump:
    """A daemon thread pumping the outbox of the Redis at ``redis_url``."""

    def __init__(
        self,
        redis_url: str,
        journal_ttl_s: int,
        prepare: Callable[[RedisStreams], None] | None = None,
    ) -> None:
        """``prepare`` runs once before the first delivery (and again until it succeeds)."""
        self._redis_url = redis_url
        self._journal_ttl_s = journal_ttl_s
        self._prepare = prepare
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delayline-pump", daemon=True)
        self.last_error: TransportError | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        # No retries inside a call: this loop waits and retries itself, and stays stoppable.
        streams = RedisStreams.from_url(self._redis_url, patience_ms=0)
        try:
            while not self._stop.is_set():
                try:
                    if self._prepare is not None:
                        self._prepare(streams)
                        self._prepare = None
                    result = streams.pump(PUMP_BATCH, self._journal_ttl_s)
                except TransportError as exc:
                    # Redis is away: keep trying; the outbox is durable there.
                    self.last_error = exc
                    self._stop.wait(0.5)
                    continue
                self.last_error = None
                if result.moved >= PUMP_BATCH:
                    continue
                wait_s = MAX_IDLE_S
                if result.next_due_ms is not None:
                    wait_s = min(MAX_IDLE_S, max(0.0, (result.next_due_ms - result.now_ms) / 1000))
                self._stop.wait(wait_s)
        finally:
            streams.close()
