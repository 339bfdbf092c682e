"""Holding the scheduler's lease (redis/lease.py) in this process: waiting for it as a
standby, taking over, and renewing it on a thread for as long as the scheduler runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from delayline.errors import ConnectError, TransportError
from delayline.redis import keys
from delayline.redis.layout import ShardLayout
from delayline.redis.lease import Lease
from delayline.scheduler.background import Background
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import LEASE_RENEWALS, STANDBY_POLL_MS

#: How often a standby says whom it waits for (s).
WAITING_REPORT_S = 30.0


def takeover_message(token: int) -> str:
    """What a scheduler says when it finds that another took the lease from it."""
    return (
        f"another scheduler took over (this one's lease, token {token}, lapsed or was "
        "taken): this one stopped without writing more; start it again as a standby "
        "(delayline run --standby)"
    )


def wait_for_lease(
    lease: Lease,
    owner: str,
    ttl_ms: int,
    stop: threading.Event,
    echo: Callable[[str], None],
    *,
    poll_ms: int = STANDBY_POLL_MS,
) -> int | None:
    """Ask for the lease every ``poll_ms`` until ``owner`` holds it (its token) or ``stop``
    is set (None, the lease left alone), saying whom it waits for (once, then every
    WAITING_REPORT_S). Redis being away is waited out. Raises TransportError for
    other failures."""
    said_at: float | None = None
    while not stop.is_set():
        try:
            token = lease.take(owner, ttl_ms)
        except ConnectError:
            token = 0
        if token:
            return token
        if said_at is None or time.monotonic() - said_at >= WAITING_REPORT_S:
            said_at = time.monotonic()
            try:
                held = lease.holder()
                by = f"held by {held[1]} (token {held[0]})" if held else "free again"
            except ConnectError:
                by = "Redis is unreachable"
            echo(f"waiting   for the scheduler lease, {by}")
        stop.wait(poll_ms / 1000)
    return None


def fenced_shards(settings: SchedulerSettings) -> list[keys.ShardKeys]:
    """Every shard a scheduler with ``settings`` may write to or pump: each of every
    shard count the keys were laid out for, and of its own (see redis/layout.py)."""
    layout = ShardLayout.from_url(settings.redis_url, patience_ms=0)
    try:
        history = layout.history()
    finally:
        layout.close()
    return keys.read_layout(max(*history, settings.inbound_shards))


def take_over(lease: Lease, settings: SchedulerSettings, token: int) -> SchedulerSettings:
    """Raise the fence of every shard a scheduler with ``settings`` may write to
    (:func:`fenced_shards`) to ``token``, before it delivers anything: from then on an
    older scheduler writes nothing there. Returns the settings with the token, which
    its writes carry. Raises FencedError if a newer one took over, TransportError."""
    lease.raise_fences(fenced_shards(settings), token)
    return replace(settings, fence_token=token)


class LeaseKeeper(Background):
    """A daemon thread renewing ``owner``'s lease (token ``token``) LEASE_RENEWALS times
    per ``ttl_ms``; once a renewal finds the lease taken by another, it calls
    ``on_lost`` (on this thread) and stops, with :attr:`lost` set."""

    def __init__(
        self,
        redis_url: str,
        owner: str,
        token: int,
        ttl_ms: int,
        on_lost: Callable[[], None],
    ) -> None:
        self._redis_url = redis_url
        self._owner = owner
        self.token = token
        self._ttl_ms = ttl_ms
        self._on_lost = on_lost
        self._renew_interval_ms = ttl_ms // LEASE_RENEWALS
        #: Set once another scheduler holds the lease.
        self.lost = threading.Event()
        super().__init__("delayline-lease")

    @classmethod
    def of(
        cls, settings: SchedulerSettings, owner: str, on_lost: Callable[[], None]
    ) -> LeaseKeeper:
        """The keeper of ``owner``'s lease, with the token and ttl of ``settings``."""
        return cls(settings.redis_url, owner, settings.fence_token, settings.lease_ms, on_lost)

    def _run(self) -> None:
        # No retries inside a call: a renewal that fails is tried again at the next tick.
        lease = Lease.from_url(self._redis_url, patience_ms=0)
        try:
            while not self._stop.wait(self._renew_interval_ms / 1000):
                try:
                    held = lease.take(self._owner, self._ttl_ms, self.token)
                except TransportError:
                    # Redis is away: nobody writes meanwhile; the lease is taken back
                    # when it returns, unless another scheduler took it.
                    continue
                if held != self.token:
                    self.lost.set()
                    self._on_lost()
                    return
        finally:
            lease.close()

    def give_up(self) -> None:
        """Stop renewing, and free the lease for a standby (unless it was lost). Redis
        being away is not waited for: the lease lapses by itself."""
        self.stop()
        if self.lost.is_set():
            return
        lease = Lease.from_url(self._redis_url, patience_ms=0)
        try:
            lease.give_up(self._owner)
        except TransportError:
            pass
        finally:
            lease.close()
