"""The scheduler's lease and its fencing tokens: one scheduler delivers at a time.

A scheduler takes the lease (``keys.LEASE``, lua/lease.lua) before it writes
anything, and renews it ``LEASE_RENEWALS`` times a ttl; a standby asks for it
every ``STANDBY_POLL_MS`` and takes it once it has lapsed (its ttl, by default
``LEASE_TTL_MS``, after the holder's last renewal); the constants are in
delayline/timing.py. Each taking draws a new token from a counter that only
grows (``keys.LEASE_TOKEN``).

A lease alone cannot stop a holder that was paused past its ttl (SIGSTOP, a
long GC, a frozen VM) from writing once it wakes, before it learns that it
lost. Fencing does: each shard has a fence (``ShardKeys.fence``), which the new
holder raises to its token before it delivers anything (lua/raise_fence.lua),
and the scheduler's shard scripts (write_chunk.lua, pump.lua, settle_ready.lua)
take the writer's token and refuse, writing nothing, when it is below the
shard's fence (lua/fence.lua); Python raises FencedError. A shard script cannot
read the lease itself: on Redis Cluster it lives in another slot.

Token 0 (no lease: tests and tools that call the store directly) passes only
while a shard has no fence, that is until a scheduler first takes the lease;
from then on every writer needs the lease: ``delayline run`` and ``delayline
drain`` take it.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from typing import Any

from delayline.errors import FencedError
from delayline.redis import keys, scripts
from delayline.redis.connection import RedisConnection
from delayline.timing import LEASE_TTL_MS


def new_owner() -> str:
    """A name for this process's claim on the lease, unique across hosts and restarts:
    ``<host>:<pid>:<random>``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_of(value: bytes | str | None) -> tuple[int, str] | None:
    """The lease's value as (token, owner), or None for a free lease."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    token, _, owner = text.partition(" ")
    return int(token), owner


class Lease(RedisConnection):
    """The lease in Redis, taken, renewed and given up by ``owner``."""

    def take(self, owner: str, ttl_ms: int = LEASE_TTL_MS, token: int = 0) -> int:
        """Renew the lease for ``ttl_ms`` if ``owner`` holds it, or take it if it is free:
        with a new token if ``token`` is 0, else with ``token`` again, and only if
        nobody took the lease since (lua/lease.lua). Returns the owner's token, or 0 if
        it does not hold the lease. Raises TransportError."""
        return int(self._call_lease("take the scheduler lease", owner, ttl_ms, token))

    def give_up(self, owner: str) -> bool:
        """Free the lease if ``owner`` holds it (a standby takes it at once); whether
        it did. Raises TransportError."""
        return int(self._call_lease("give the scheduler lease up", owner, 0, 0)) > 0

    def _call_lease(self, action: str, owner: str, ttl_ms: int, token: int) -> Any:
        script_keys = scripts.LEASE.keys(lease=keys.LEASE, token=keys.LEASE_TOKEN)
        return self._script(action, scripts.LEASE, script_keys, [owner, ttl_ms, token])

    def holder(self) -> tuple[int, str] | None:
        """Who holds the lease now, as (token, owner); None if nobody does."""
        value = self._call(
            "read the scheduler lease", lambda: self._node(keys.LEASE).get(keys.LEASE)
        )
        return holder_of(value)

    def raise_fences(self, shards: Iterable[keys.ShardKeys], token: int) -> None:
        """Raise each shard's fence to ``token`` (each a max, atomic per shard): from then
        on, writers with a lower token are refused there. Raises FencedError if a
        shard's fence stands higher (a newer scheduler took over), TransportError."""
        for shard in shards:
            fence = int(
                self._script(
                    "raise the fence",
                    scripts.RAISE_FENCE,
                    scripts.RAISE_FENCE.keys(shard),
                    [token],
                )
            )
            if fence > token:
                raise FencedError(
                    f"the fence of {shard.namespace} stands at {fence}, above this "
                    f"scheduler's lease token {token}: another scheduler took over"
                )
