"""The fine wheel: delivers outbox messages at their due time, by Redis's clock.

Spark's wheel is coarse (a batch every few hundred ms); it emits each message
``horizon_ms`` early into the outbox, a Redis sorted set by due time. This
thread moves each one to its topic when Redis's clock reaches it, with one Lua
script call at a time (atomic: a message is delivered once, even with several
pumps). The outbox holds about rate times the horizon messages.

It does not poll. Within GUARD_MS of the next due entry it sleeps until then,
to the µs of Redis's clock, and then sends as many calls as the entries due by
then need (up to MAX_HERD_CALLS) in one round trip; otherwise it blocks on the
outbox's bell, which every put of an entry due within BELL_WITHIN_MS rings, for
at most MAX_NAP_S. An idle pump makes one call a second. With Redis shards, each
shard's outbox has a pump of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from delayline.errors import DelaylineError, TransportError
from delayline.kafka.flushing import KafkaFlusher, flusher_for
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.scheduler.background import Background
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import HORIZON_MS, now_ms

#: Most messages one pump call moves. More due at once go evenly over the calls
#: they need (lua/pump.lua): 1,030 as 515 and 515, not 1,000 and 30.
PUMP_BATCH = 1_000
#: Most pump calls sent in one round trip, for a herd due at once that needs
#: several: Redis runs each right after the one before, not a round trip later.
#: Other clients wait for the whole round trip, so a larger herd or a backlog
#: goes over several, and they get their turn between them.
MAX_HERD_CALLS = 2
#: Longest nap on the bell (s). An entry due later than this (plus the guard) is
#: seen at the next call anyway, so only entries due sooner ring (BELL_WITHIN_MS).
MAX_NAP_S = 1.0
#: Redis times a blocked call out on its 100 ms cron: within this much of the
#: next due entry (ms), the pump sleeps here, precisely, instead.
GUARD_MS = 200


class Pump(Background):
    """A daemon thread pumping one shard's outbox in the Redis at ``redis_url``."""

    def __init__(
        self,
        redis_url: str,
        journal_ttl_s: int,
        prepare: Callable[[], None] | None = None,
        *,
        shard: keys.ShardKeys = keys.UNSHARDED,
        horizon_ms: int = HORIZON_MS,
        fence_token: int = 0,
    ) -> None:
        """``prepare`` runs before the first delivery (and again until it succeeds);
        ``horizon_ms`` is the scheduler's (a reschedule's new message due within it
        goes back to the outbox); ``fence_token`` its lease's (redis/lease.py): once
        another scheduler has taken the shard over, the pump stops with a
        FencedError as its :attr:`failure`."""
        self._redis_url = redis_url
        self._journal_ttl_s = journal_ttl_s
        self._prepare = prepare
        self._shard = shard
        self._horizon_ms = horizon_ms
        self._fence_token = fence_token
        super().__init__(f"delayline-pump-{shard.namespace}")
        self.last_error: TransportError | None = None
        #: Why ``prepare`` refused to let the pump start, if it did.
        self.failure: DelaylineError | None = None

    @property
    def pump_id(self) -> str:
        """This pump's name where it must be unique: its Kafka transactional id."""
        return f"delayline-pump-{self._shard.namespace.rstrip(':')}"

    @classmethod
    def of(
        cls,
        settings: SchedulerSettings,
        shard: keys.ShardKeys,
        prepare: Callable[[], None] | None = None,
    ) -> Pump:
        """The pump of ``shard``'s outbox for a scheduler with ``settings``."""
        return cls(
            settings.redis_url,
            settings.journal_ttl_s,
            prepare,
            shard=shard,
            horizon_ms=settings.horizon_ms,
            fence_token=settings.fence_token,
        )

    def _run(self) -> None:
        # No retries inside a call: this loop waits and retries itself, and stays stoppable.
        store = DeliveryStore.from_url(self._redis_url, patience_ms=0)
        store.fence_token = self._fence_token
        flusher: KafkaFlusher | None = None
        prepared = False
        calls = 1
        try:
            while not self._stop.is_set():
                try:
                    if not prepared:
                        if self._prepare is not None:
                            self._prepare()
                        # The shard's target is set by then (Scheduler._prepare).
                        flusher = flusher_for(store.target_of(self._shard), self.pump_id)
                        if flusher is not None:
                            # Its producer ready (and a crash's last transaction
                            # recovered) before the first message is due.
                            flusher.flush(store, self._shard, self._journal_ttl_s)
                        prepared = True
                    sent_s = time.monotonic()
                    result = store.pump(
                        PUMP_BATCH,
                        self._journal_ttl_s,
                        shard=self._shard,
                        horizon_ms=self._horizon_ms,
                        calls=calls,
                    )
                except TransportError as exc:
                    # Redis is away: keep trying; the outbox is durable there.
                    self.last_error = exc
                    self._stop.wait(0.5)
                    continue
                except DelaylineError as exc:
                    self.failure = exc
                    return
                self.last_error = None
                calls = herd_calls(result.due_by_next)
                if flusher is not None and (result.ready or flusher.busy()):
                    # Topics outside Redis: the flusher writes what this call and the
                    # sink readied, each topic on its own (kafka/flushing.py).
                    try:
                        progressed = flusher.flush(store, self._shard, self._journal_ttl_s)
                    except TransportError as exc:
                        self.last_error = exc
                        self._stop.wait(0.5)
                        continue
                    except DelaylineError as exc:  # fenced: another pump took over
                        self.failure = exc
                        return
                    if progressed:
                        continue
                elif result.ready:
                    # A sharded delivery's second step (lua/topic_writes.lua), for what
                    # this call and the sink readied.
                    try:
                        store.flush_ready(self._shard, self._journal_ttl_s, PUMP_BATCH)
                    except TransportError as exc:
                        self.last_error = exc
                        self._stop.wait(0.5)
                    except DelaylineError as exc:  # fenced: another scheduler took over
                        self.failure = exc
                        return
                    continue
                gap_ms = result.due_in_ms
                if gap_ms is not None and gap_ms <= 0:
                    continue  # more due already
                if flusher is not None and (wake_ms := flusher.wake_in_ms(now_ms())) is not None:
                    # Held messages' topics may be tried again then.
                    gap_ms = wake_ms if gap_ms is None else min(gap_ms, wake_ms)
                if gap_ms is not None and gap_ms <= GUARD_MS:
                    # From the call's sending: Redis read its clock after that, so the
                    # next call goes on the due µs or just before it (and then moves
                    # nothing and says how long is left), not most of a ms after.
                    self._stop.wait(max(0.0, sent_s + gap_ms / 1000 - time.monotonic()))
                    continue
                # Nothing due soon: block until an entry due soon rings, or the nap ends.
                # The call after a nap comes before the herd is due, and only says when.
                calls = 1
                nap_s = MAX_NAP_S if gap_ms is None else min(MAX_NAP_S, (gap_ms - GUARD_MS) / 1000)
                try:
                    store.wait_for_bell(nap_s, shard=self._shard)
                except TransportError as exc:
                    self.last_error = exc
                    self._stop.wait(0.5)
        finally:
            if flusher is not None:
                flusher.close()
            store.close()


def herd_calls(due: int) -> int:
    """How many pump calls to send in one round trip for ``due`` messages due at once:
    as many as they need at PUMP_BATCH a call, 1 to MAX_HERD_CALLS."""
    return min(MAX_HERD_CALLS, max(1, -(-due // PUMP_BATCH)))
